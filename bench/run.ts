// `npm run bench -- <service>`: runs bench/<service>.ts, which prints its figures beside a
// baseline measured in the same run.
const BENCHMARKS: Record<string, () => Promise<{ run(): Promise<void> }>> = {
  config: () => import('./config.ts'),
  docdb: () => import('./docdb.ts'),
  files: () => import('./files.ts'),
  lambda: () => import('./lambda.ts'),
  logs: () => import('./logs.ts'),
  gateway: () => import('./gateway.ts'),
  kv: () => import('./kv.ts'),
  scheduler: () => import('./scheduler.ts'),
  triggers: () => import('./triggers.ts'),
  run: () => import('./run-service.ts'),
  cluster: () => import('./cluster.ts'),
};

const name = process.argv[2];
const loadBenchmark = name ? BENCHMARKS[name] : undefined;
if (!loadBenchmark) {
  console.error(`usage: npm run bench -- <${Object.keys(BENCHMARKS).join('|')}>`);
  process.exit(2);
}
const benchmark = await loadBenchmark();
await benchmark.run();
if (process.exitCode === 1)
  console.error(
    `\nbench ${name} FAILED: some scenarios had errors or non-2xx answers (BENCH INVALID lines above); their rates are not throughput`,
  );
