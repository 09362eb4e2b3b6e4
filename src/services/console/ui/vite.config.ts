import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The web console: built by `npm run build:console` (and `npm install`, through `prepare`) into
// dist/console, which the console service serves. Nothing built is committed.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs: the console is served at `/` on console.<domain> and under
  // `/services/console/` on the front door (root README.md, One base URL).
  base: './',
  build: {
    outDir: fileURLToPath(new URL('../../../../dist/console', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
  },
  logLevel: 'warn',
});
