/**
 * Debian's Chromium, headless, driven over the DevTools protocol (CDP) through
 * `--remote-debugging-pipe`: the browser reads commands from fd 3 and writes replies and events to
 * fd 4, each a JSON message ended by a NUL byte. No WebSocket and no npm dependency.
 *
 *   test ──JSON\0──▶ fd 3 ──▶ chromium (browser target)
 *   test ◀──JSON\0── fd 4 ◀──  └─ page target, reached through a flattened session (sessionId)
 *
 * Every browser gets a fresh --user-data-dir, removed by close(); close() also kills the process
 * (SIGKILL if Browser.close does not end it), so a test calls it in afterEach.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

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

/** A CDP error reply. */
export class CdpError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    detail: string,
  ) {
    super(`cdp: ${method} failed (${code}): ${detail}`);
    this.name = 'CdpError';
  }
}

interface Pending {
  method: string;
  resolve: (v: Record<string, unknown>) => void;
  reject: (e: Error) => void;
}

type EventListener = (params: Record<string, unknown>, sessionId: string | undefined) => void;

/** The NUL-framed JSON connection over the two pipes. */
class CdpPipe {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Map<string, Set<EventListener>>();
  private buffered = '';
  private closedError: Error | null = null;

  constructor(
    private readonly out: Writable,
    input: Readable,
  ) {
    input.setEncoding('utf8');
    input.on('data', (chunk: string) => this.onData(chunk));
    input.on('close', () => this.fail(new Error('cdp: the browser closed its pipe')));
    input.on('error', (e: Error) => this.fail(e));
    out.on('error', (e: Error) => this.fail(e));
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    if (this.closedError !== null) return Promise.reject(this.closedError);
    const id = this.nextId++;
    const msg: Record<string, unknown> = { id, method, params };
    if (sessionId !== undefined) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { method, resolve, reject });
      this.out.write(JSON.stringify(msg) + '\0');
    });
  }

  on(method: string, fn: EventListener): () => void {
    let set = this.listeners.get(method);
    if (set === undefined) this.listeners.set(method, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }

  private onData(chunk: string): void {
    this.buffered += chunk;
    for (;;) {
      const end = this.buffered.indexOf('\0');
      if (end < 0) return;
      const frame = this.buffered.slice(0, end);
      this.buffered = this.buffered.slice(end + 1);
      this.dispatch(frame);
    }
  }

  private dispatch(frame: string): void {
    let msg: { id?: number; method?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { code: number; message: string; data?: string }; sessionId?: string };
    try {
      msg = JSON.parse(frame) as typeof msg;
    } catch {
      this.fail(new Error(`cdp: unparsable frame ${frame.slice(0, 200)}`));
      return;
    }
    if (typeof msg.id === 'number') {
      const p = this.pending.get(msg.id);
      if (p === undefined) return;
      this.pending.delete(msg.id);
      if (msg.error !== undefined) p.reject(new CdpError(p.method, msg.error.code, msg.error.message + (msg.error.data ? ` (${msg.error.data})` : '')));
      else p.resolve(msg.result ?? {});
      return;
    }
    if (typeof msg.method === 'string') {
      const set = this.listeners.get(msg.method);
      if (set !== undefined) for (const fn of [...set]) fn(msg.params ?? {}, msg.sessionId);
    }
  }

  private fail(e: Error): void {
    if (this.closedError !== null) return;
    this.closedError = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }
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
  private stderr = '';
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    private readonly cdp: CdpPipe,
    private readonly userDataDir: string,
    private sessionId: string,
  ) {
    child.stderr?.on('data', (d: Buffer) => {
      // Kept for failure messages only; chromium is chatty, the tail is what matters.
      this.stderr = (this.stderr + d.toString()).slice(-8000);
    });
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

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
    const userDataDir = mkdtempSync(join(tmpdir(), 'headless-chromium-'));
    const child = spawn(executable, [...CHROMIUM_FLAGS, `--user-data-dir=${userDataDir}`, `--window-size=${width},${height}`, 'about:blank'], {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
      // Its own process group: close() can end the renderers and zygotes with the browser.
      detached: true,
    });
    const cdp = new CdpPipe(child.stdio[3] as Writable, child.stdio[4] as Readable);
    const browser = new HeadlessChromium(child, cdp, userDataDir, '');
    try {
      const spawned = new Promise<never>((_, reject) => {
        child.once('error', (e) => reject(new Error(`cannot start ${executable}: ${e.message}`)));
        child.once('exit', (code, signal) => reject(new Error(`chromium exited (${code ?? signal}) during start:\n${browser.stderr}`)));
      });
      spawned.catch(() => undefined);
      const { targetId } = (await Promise.race([cdp.send('Target.createTarget', { url: 'about:blank' }), spawned])) as { targetId: string };
      const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
      browser.sessionId = sessionId;
      await browser.page('Page.enable');
      await browser.page('Runtime.enable');
      await browser.page('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
    } catch (e) {
      await browser.close();
      throw e;
    }
    return browser;
  }

  /** Navigates and waits for the page's load event. */
  async goto(url: string, timeoutMs = 15000): Promise<void> {
    const loaded = new Promise<void>((resolve) => {
      const off = this.cdp.on('Page.loadEventFired', (_p, sid) => {
        if (sid !== this.sessionId) return;
        off();
        resolve();
      });
    });
    const nav = (await this.page('Page.navigate', { url })) as { errorText?: string };
    if (nav.errorText) throw new Error(`navigating to ${url}: ${nav.errorText}`);
    await withTimeout(loaded, timeoutMs, `load of ${url}`);
  }

  /**
   * Evaluates `expression` in the page (awaiting a promise it returns) and returns its value as
   * JSON; a thrown exception rejects with its description.
   */
  async evaluate<T>(expression: string): Promise<T> {
    const r = (await this.page('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true })) as {
      result: { value?: unknown };
      exceptionDetails?: { text: string; exception?: { description?: string } };
    };
    if (r.exceptionDetails !== undefined) {
      throw new Error(`page exception: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    }
    return r.result.value as T;
  }

  /** Until `document.querySelector(selector)` finds an element. */
  async waitForSelector(selector: string, timeoutMs = 10000): Promise<void> {
    await this.waitForFunction(`document.querySelector(${JSON.stringify(selector)}) !== null`, timeoutMs, `selector ${selector}`);
  }

  /** Until `expression` is truthy in the page (polled every 50 ms). */
  async waitForFunction(expression: string, timeoutMs = 10000, what = expression): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await this.evaluate<boolean>(`Boolean(${expression})`)) return;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A PNG of the viewport (or of the whole page with `fullPage`) written to `path`. */
  async screenshot(path: string, opts: { fullPage?: boolean } = {}): Promise<void> {
    const params: Record<string, unknown> = { format: 'png', captureBeyondViewport: opts.fullPage === true };
    if (opts.fullPage === true) {
      const m = (await this.page('Page.getLayoutMetrics')) as { cssContentSize: { width: number; height: number } };
      params.clip = { x: 0, y: 0, width: Math.ceil(m.cssContentSize.width), height: Math.ceil(m.cssContentSize.height), scale: 1 };
    }
    const { data } = (await this.page('Page.captureScreenshot', params)) as { data: string };
    writeFileSync(path, Buffer.from(data, 'base64'));
  }

  /** The browser's stderr tail (for failure messages). */
  get log(): string {
    return this.stderr;
  }

  /** Closes the browser (Browser.close, SIGKILL after 3 s) and removes its profile directory. */
  async close(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.cdp.send('Browser.close').catch(() => undefined);
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
      await this.exited;
      clearTimeout(timer);
    }
    // Helpers left in the browser's group (by its id; ESRCH when none are left).
    if (this.child.pid !== undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // the group is already gone
      }
    }
    rmSync(this.userDataDir, { recursive: true, force: true });
  }

  /** A command on the page's session. */
  private page(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    return this.cdp.send(method, params, this.sessionId);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
