import { execFile } from 'node:child_process';
import { aptInstall } from './apt.ts';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';

const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = join(ROOT, 'test-artifacts', 'console');

/** The newest modification time of the files under `dir`. */
function newestIn(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestIn(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Builds the web console into dist/console when it is not there yet or its sources (or the client's) changed since. */
export async function ensureConsoleBuilt(): Promise<void> {
  const built = join(ROOT, 'dist', 'console', 'index.html');
  const sources = [join(ROOT, 'src', 'services', 'console', 'ui'), join(ROOT, 'packages', 'client', 'src')];
  if (existsSync(built) && statSync(built).mtimeMs >= Math.max(...sources.map(newestIn))) return;
  await run('npm', ['run', 'build:console'], { cwd: ROOT, timeout: 5 * 60_000, maxBuffer: 16 * 1024 * 1024 });
}

/** Installs Debian's chromium when it is missing (CI runs as root). */
export async function ensureChromium(): Promise<void> {
  await aptInstall('chromium', () => existsSync(CHROMIUM));
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 60_000,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}

/** Saves a full-page screenshot as test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true, timeout: 15_000 });
}

/** Collects the page's console errors and failed requests, to explain a failing step. */
export function pageLog(page: Page): () => string {
  const lines: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning')
      lines.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => lines.push(`pageerror: ${error.message}`));
  page.on('requestfailed', (request) =>
    lines.push(`requestfailed: ${request.method()} ${request.url()} ${request.failure()?.errorText ?? ''}`),
  );
  return () => lines.slice(-40).join('\n');
}
