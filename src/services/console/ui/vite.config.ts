import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The web console: built by `npm run build:console` (and `npm install`, through `prepare`) into
// dist/console, which the console service serves. Nothing built is committed.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs: the console is served at `/` on console.<domain> and under
  // `/services/console/` on the front door (root README.md, One base URL).
  base: './',
  // The client SDK from its sources, as tsx and tsc read it (root tsconfig.json paths): no build of
  // packages/client needed first, and one bundle.
  resolve: {
    alias: {
      '@stratus/client': fileURLToPath(new URL('../../../../packages/client/src/index.ts', import.meta.url)),
    },
  },
  build: {
    outDir: fileURLToPath(new URL('../../../../dist/console', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
  },
  logLevel: 'warn',
});
