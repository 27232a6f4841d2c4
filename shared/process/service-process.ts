/**
 * The one supervisor for child processes that tests, tools (the local stack) and benches start.
 * Each child leads its own process group, so `stop()` and `kill()` reach anything it started in
 * turn (the stack's etcd and engines); once the leader has exited its pid (= group id) may be
 * reused by another group on a shared machine, so a group is only signalled while its leader is
 * known to run, and once more right after its exit. Every child is tracked until it exits, and a
 * process 'exit' hook SIGKILLs any group still alive if the parent itself goes down.
 *
 * Output: stdout and stderr lines are kept (bounded, interleaved as they arrived), lines that
 * parse as JSON objects (pino) also as `logLines`; with `logFile` everything is appended there
 * too. Readiness waits poll a condition and fail early, with the output tail, when the child
 * exits first.
 */
import { spawn, type ChildProcess, type Serializable, type StdioOptions } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { connect } from 'node:net';

/** One JSON log line as the child printed it (pino: level, msg, component, ...). */
export type LogLine = Readonly<Record<string, unknown>>;

export interface SpawnOptions {
  /** Label used in errors and timeouts (`directory`, `router-1`). */
  readonly name: string;
  /** Script run as `node --import tsx <entry>` (relative to cwd) unless `command` is given. */
  readonly entry?: string;
  readonly args?: readonly string[];
  /** Another executable (etcd, or `process.execPath` with node flags of your own). */
  readonly command?: string;
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Appends all output to this file as well (the stack's `<run dir>/logs/<name>.log`). */
  readonly logFile?: string;
  /** Lines kept in memory; enough for a failure message, bounded for chatty children. */
  readonly keptLines?: number;
  /**
   * false: `stopAllProcesses()` leaves it alone, because an owner stops it in its own order (a
   * test's etcd outlives the engines that revoke their leases on stop). The exit hook still
   * kills it. Default true.
   */
  readonly stopWithAll?: boolean;
  /** An IPC channel as fork() opens it (`process.send` in the child): `send` and `onMessage`. */
  readonly ipc?: boolean;
  /** The child's stderr goes to this process's stderr instead of being kept (a bench's worker). */
  readonly inheritStderr?: boolean;
}

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const DEFAULT_KEPT_LINES = 5000;
/** SIGTERM grace before SIGKILL; the services' own stop deadline is 10 s (directory main.ts). */
const DEFAULT_GRACE_MS = 12000;
const POLL_MS = 10;
/** What a child that could not be started at all (ENOENT) reports, as a shell would. */
const SPAWN_FAILED_CODE = 127;

const running = new Set<ServiceProcess>();

// Last resort when the parent exits with children still up (mocha --exit, a crash, the stack
// killed): 'exit' handlers must be synchronous, and process.kill is.
process.on('exit', () => {
  for (const p of running) signalGroup(p.pid, 'SIGKILL');
});

export class ServiceProcess {
  private readonly lines: string[] = [];
  private readonly streamLines = { stdout: [] as string[], stderr: [] as string[] };
  private readonly jsonLines: LogLine[] = [];
  private readonly exited: Promise<ExitStatus>;
  private readonly log: WriteStream | null;
  private readonly keptLines: number;
  readonly stopWithAll: boolean;
  private exitStatus: ExitStatus | null = null;
  private partial = { stdout: '', stderr: '' };

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    opts: SpawnOptions,
  ) {
    this.keptLines = opts.keptLines ?? DEFAULT_KEPT_LINES;
    this.stopWithAll = opts.stopWithAll ?? true;
    this.log = opts.logFile === undefined ? null : createWriteStream(opts.logFile, { flags: 'a' });
    this.exited = new Promise((resolve) => {
      // 'close', not 'exit': the output pipes are drained by then, so `output` is complete.
      child.once('close', (code, signal) => {
        this.flushPartial();
        this.exitStatus ??= { code, signal };
        running.delete(this);
        resolve(this.exitStatus);
      });
    });
    child.stdout?.on('data', (d: Buffer) => this.take('stdout', d));
    child.stderr?.on('data', (d: Buffer) => this.take('stderr', d));
    child.once('error', (e) => {
      // ENOENT (binary missing) arrives here, not as a throw from spawn(); 'close' follows.
      this.take('stderr', Buffer.from(`spawn ${opts.command ?? process.execPath} failed: ${e.message}\n`));
      this.exitStatus ??= { code: SPAWN_FAILED_CODE, signal: null };
      running.delete(this);
    });
  }

  /** Starts the child (it is tracked from this moment). */
  static spawn(opts: SpawnOptions): ServiceProcess {
    if (opts.command === undefined && opts.entry === undefined) throw new Error(`${opts.name}: give entry or command`);
    const command = opts.command ?? process.execPath;
    const args = opts.command === undefined ? ['--import', 'tsx', opts.entry!, ...(opts.args ?? [])] : [...(opts.args ?? [])];
    // detached: the child leads its own process group, so a group signal reaches its children too.
    const stdio: StdioOptions = ['ignore', 'pipe', opts.inheritStderr === true ? 'inherit' : 'pipe', ...(opts.ipc === true ? ['ipc' as const] : [])];
    const child = spawn(command, args, { cwd: opts.cwd ?? process.cwd(), env: opts.env ?? process.env, stdio, detached: true });
    const p = new ServiceProcess(opts.name, child, opts);
    if (child.pid !== undefined) running.add(p);
    return p;
  }

  /** The child's pid; 0 when it could not be spawned (then `exit` is already set or soon is). */
  get pid(): number {
    return this.child.pid ?? 0;
  }

  get isRunning(): boolean {
    return this.exitStatus === null;
  }

  get exit(): ExitStatus | null {
    return this.exitStatus;
  }

  /** Every output line so far (stdout and stderr interleaved as they arrived). */
  get output(): readonly string[] {
    return this.lines;
  }

  /** The lines of one stream alone, for a test that checks what went to stdout and what to stderr. */
  linesOf(stream: 'stdout' | 'stderr'): readonly string[] {
    return this.streamLines[stream];
  }

  /** Output lines that were JSON objects (the service's structured log). */
  get logLines(): readonly LogLine[] {
    return this.jsonLines;
  }

  /** The last `n` output lines, for failure messages. */
  tail(n = 40): string {
    return this.lines.slice(-n).join('\n');
  }

  /** Resolves with the first JSON log line (already seen or future) matching `match`. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs = 20000, what = 'log line'): Promise<LogLine> {
    return this.waitUntil(what, () => this.jsonLines.find(match), timeoutMs);
  }

  /** Resolves with the first output line (JSON or not) matching `re`. */
  waitForOutput(re: RegExp, timeoutMs = 20000): Promise<string> {
    return this.waitUntil(`output ${re}`, () => this.lines.find((l) => re.test(l)), timeoutMs);
  }

  /** Resolves once a TCP connect to 127.0.0.1:`port` succeeds. */
  async waitForPort(port: number, timeoutMs = 20000): Promise<void> {
    await this.waitUntil(`port ${port}`, () => portAnswers(port), timeoutMs);
  }

  /** Resolves once `GET url` answers `status` (default 200). */
  async waitForHttp(url: string, timeoutMs = 20000, status = 200): Promise<void> {
    await this.waitUntil(`GET ${url} → ${status}`, async () => (await httpStatus(url)) === status, timeoutMs);
  }

  /** Sends one message over the IPC channel (`ipc: true`). */
  send(message: Serializable): void {
    if (this.child.send === undefined) throw new Error(`${this.name}: spawned without ipc`);
    this.child.send(message);
  }

  /** Calls `handler` with every IPC message from the child (`ipc: true`). */
  onMessage(handler: (message: unknown) => void): void {
    this.child.on('message', handler);
  }

  /** Resolves when the child has exited, however long that takes (no signal sent). */
  whenExited(): Promise<ExitStatus> {
    return this.exited;
  }

  /** Resolves when the child exits (no signal sent). */
  waitForExit(timeoutMs = 60000): Promise<ExitStatus> {
    return this.poll('exit', () => this.exitStatus, timeoutMs, false);
  }

  /** Resolves with `ready()`'s first truthy value; rejects, with the output tail, if the child exits first or `timeoutMs` passes. */
  waitUntil<T>(what: string, ready: () => T | Promise<T>, timeoutMs: number): Promise<NonNullable<T>> {
    return this.poll(what, ready, timeoutMs, true);
  }

  /** SIGTERM to the group, then SIGKILL after `graceMs`; resolves with how it exited. Idempotent. */
  async stop(graceMs = DEFAULT_GRACE_MS): Promise<ExitStatus> {
    if (this.exitStatus === null) {
      signalGroup(this.pid, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(this.pid, 'SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
      signalGroup(this.pid, 'SIGKILL'); // right after its exit: anything it left in its group
    }
    await this.exited;
    await this.closeLog();
    return this.exitStatus!;
  }

  /** Sends `signal` to the group while the child runs (SIGINT as a terminal's Ctrl-C would). */
  signal(signal: NodeJS.Signals): void {
    if (this.exitStatus === null) signalGroup(this.pid, signal);
  }

  /** kill -9 of the whole group: a crash, nothing flushed. */
  async kill(): Promise<ExitStatus> {
    if (this.exitStatus === null) signalGroup(this.pid, 'SIGKILL');
    const status = await this.exited;
    await this.closeLog();
    return status;
  }

  /** True while any process of the child's group (the child or something it started) exists. */
  groupAlive(): boolean {
    return this.pid !== 0 && pidAlive(-this.pid);
  }

  private async poll<T>(what: string, fn: () => T | Promise<T>, timeoutMs: number, failOnExit: boolean): Promise<NonNullable<T>> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const v = await fn();
      if (v) return v as NonNullable<T>;
      if (failOnExit && this.exitStatus !== null) {
        throw this.failure(`${this.name} exited (code ${this.exitStatus.code}, signal ${this.exitStatus.signal}) before ${what}`);
      }
      if (performance.now() > deadline) throw this.failure(`timed out after ${timeoutMs} ms waiting for ${this.name}: ${what}`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  private failure(msg: string): Error {
    const where = this.log === null ? 'output' : `${this.log.path.toString()}`;
    return new Error(`${msg}\n--- ${this.name} ${where} (tail) ---\n${this.tail()}`);
  }

  private closeLog(): Promise<void> {
    const log = this.log;
    if (log === null || log.writableEnded) return Promise.resolve();
    return new Promise((resolve) => log.end(() => resolve()));
  }

  private take(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    if (this.log !== null && !this.log.writableEnded) this.log.write(chunk);
    const parts = (this.partial[stream] + chunk.toString('utf8')).split('\n');
    this.partial[stream] = parts.pop()!;
    for (const line of parts) this.keep(stream, line);
  }

  private flushPartial(): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.partial[stream] !== '') this.keep(stream, this.partial[stream]);
      this.partial[stream] = '';
    }
  }

  private keep(stream: 'stdout' | 'stderr', line: string): void {
    if (line === '') return;
    this.lines.push(line);
    if (this.lines.length > this.keptLines) this.lines.shift();
    const own = this.streamLines[stream];
    own.push(line);
    if (own.length > this.keptLines) own.shift();
    const json = parseJsonObject(line);
    if (json !== null) {
      this.jsonLines.push(json);
      if (this.jsonLines.length > this.keptLines) this.jsonLines.shift();
    }
  }
}

/** Stops every child still running (SIGTERM, then SIGKILL after `graceMs`) but those with an owner: for afterEach/after. */
export async function stopAllProcesses(graceMs = DEFAULT_GRACE_MS): Promise<void> {
  await Promise.all([...running].filter((p) => p.stopWithAll).map((p) => p.stop(graceMs)));
}

/** True when some process with this pid exists (zombies included); a negative pid asks about a group. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid === 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone, which is what we want.
  }
}

function parseJsonObject(line: string): LogLine | null {
  if (!line.startsWith('{')) return null;
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as LogLine) : null;
  } catch {
    return null;
  }
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ port, host: '127.0.0.1' });
    s.setTimeout(500);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(false));
  });
}

/** `GET url`'s status, 0 when nothing answers within a second. */
export async function httpStatus(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer().catch(() => undefined);
    return res.status;
  } catch {
    return 0;
  }
}
