/**
 * Debian's Chromium, headless, driven by `puppeteer-core` over the DevTools protocol through
 * `--remote-debugging-pipe` (fds 3 and 4). puppeteer-core downloads no browser: it starts the system
 * binary that ensureChromium() finds, with our flags only (its defaults are switched off), and a fresh
 * --user-data-dir of its own that it removes when the browser closes. close() also kills the
 * browser's process group, so a test calls it in afterEach.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

/** The flags the machine needs: no sandbox as root, no GPU, nothing that reaches the network. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  '--disable-extensions',
  '--hide-scrollbars',
  '--mute-audio',
  '--remote-debugging-pipe',
];

const CANDIDATES = ['chromium', 'chromium-browser'];

function which(cmd: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  const path = r.status === 0 ? r.stdout.trim() : '';
  return path !== '' && existsSync(path) ? path : null;
}

export type ChromiumLookup = { kind: 'found'; path: string } | { kind: 'missing'; reason: string };

/**
 * The chromium binary; when it is missing and we are root, installs Debian's `chromium` first
 * (as `.ci/run` and `scripts/setup.mjs --etcd` do). Missing and not root: the reason to skip.
 */
export function ensureChromium(): ChromiumLookup {
  for (const c of CANDIDATES) {
    const p = which(c);
    if (p !== null) return { kind: 'found', path: p };
  }
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    return { kind: 'missing', reason: 'chromium is not installed and this user cannot install it (not root): apt-get install -y chromium' };
  }
  const r = spawnSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 15 * 60_000,
  });
  const p = which('chromium');
  if (p !== null) return { kind: 'found', path: p };
  // Root but the install failed (no mirror reachable): a failure, not a skip.
  throw new Error(`apt-get install chromium failed (exit ${r.status}):\n${(r.stderr ?? '').slice(-2000)}`);
}

export interface LaunchOptions {
  /** Default: ensureChromium()'s path. */
  readonly executable?: string;
  /** Viewport in CSS pixels (default 1280 × 900). */
  readonly width?: number;
  readonly height?: number;
}

/** One headless Chromium with one page. */
export class HeadlessChromium {
  private constructor(
    private readonly browser: Browser,
    private readonly tab: Page,
  ) {}

  /** Starts the browser and opens one blank page at the given viewport. */
  static async launch(opts: LaunchOptions = {}): Promise<HeadlessChromium> {
    let executable = opts.executable;
    if (executable === undefined) {
      const found = ensureChromium();
      if (found.kind === 'missing') throw new Error(found.reason);
      executable = found.path;
    }
    const width = opts.width ?? 1280;
    const height = opts.height ?? 900;
    const browser = await puppeteer.launch({
      executablePath: executable,
      headless: true,
      pipe: true,
      // Exactly our flags: puppeteer's defaults would add automation switches the page does not need.
      ignoreDefaultArgs: true,
      args: [...CHROMIUM_FLAGS, `--window-size=${width},${height}`, 'about:blank'],
      defaultViewport: { width, height, deviceScaleFactor: 1 },
    });
    try {
      return new HeadlessChromium(browser, await browser.newPage());
    } catch (e) {
      await browser.close();
      throw e;
    }
  }

  /** Navigates and waits for the page's load event. */
  async goto(url: string, timeoutMs = 15000): Promise<void> {
    await this.tab.goto(url, { waitUntil: 'load', timeout: timeoutMs });
  }

  /**
   * Evaluates `expression` in the page (awaiting a promise it returns) and returns its value as
   * JSON; a thrown exception rejects with its description.
   */
  async evaluate<T>(expression: string): Promise<T> {
    return (await this.tab.evaluate(expression)) as T;
  }

  /** Until `document.querySelector(selector)` finds an element. */
  async waitForSelector(selector: string, timeoutMs = 10000): Promise<void> {
    await this.waitForFunction(`document.querySelector(${JSON.stringify(selector)}) !== null`, timeoutMs, `selector ${selector}`);
  }

  /** Until `expression` is truthy in the page (polled every 50 ms). */
  async waitForFunction(expression: string, timeoutMs = 10000, what = expression): Promise<void> {
    try {
      await this.tab.waitForFunction(expression, { timeout: timeoutMs, polling: 50 });
    } catch (e) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** A PNG of the viewport (or of the whole page with `fullPage`) written to `path`. */
  async screenshot(path: string, opts: { fullPage?: boolean } = {}): Promise<void> {
    await this.tab.screenshot({ path, fullPage: opts.fullPage === true });
  }

  /** Closes the browser; when it does not close, kills it. Either way its profile directory goes. */
  async close(): Promise<void> {
    try {
      await this.browser.close();
    } catch {
      this.browser.process()?.kill('SIGKILL');
    }
  }
}
