import { startStratus } from './bench/lib.ts';
const s = await startStratus([], { DATA_DIR: '/tmp/sd3' });
console.log('port', s.port);
await new Promise((r) => setTimeout(r, 40_000));
await s.stop();
