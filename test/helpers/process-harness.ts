/**
 * Services as real child processes for integration tests (house rule: real processes, no
 * orphans). `ServiceProcess.spawn` starts `node --import tsx <entry>` by default, so tests need
 * no build; the child is a process-group leader, so `stop()` and `kill()` reach anything it
 * started in turn (the stack's etcd and engines). Every child is tracked until it exits:
 * `stopAllProcesses()` in an afterEach/after hook stops whatever a failed test left running, and a
 * process 'exit' hook SIGKILLs any group still alive if mocha itself goes down.
 *
 * Output: stdout and stderr lines are kept (bounded); lines that parse as JSON objects (pino) are
 * also kept as `logLines`, which `waitForLog` matches. Readiness waits are polls of a condition
 * (a log line, a TCP port, an HTTP status) that fail early, with the output tail, when the
 * child exits first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { waitFor } from './ports.js';

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
}

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Output lines kept per stream; enough for a failure message, bounded for chatty children. */
const MAX_KEPT_LINES = 5000;
/** SIGTERM grace before SIGKILL; the services' own stop deadline is 10 s (directory main.ts). */
const DEFAULT_GRACE_MS = 12000;

const running = new Set<ServiceProcess>();

export class ServiceProcess {
  private readonly lines: string[] = [];
  private readonly jsonLines: LogLine[] = [];
  private readonly exited: Promise<ExitStatus>;
  private exitStatus: ExitStatus | null = null;
  private partial = { stdout: '', stderr: '' };

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => {
      // 'close', not 'exit': the output pipes are drained by then, so `output` is complete.
      child.once('close', (code, signal) => {
        this.exitStatus = { code, signal };
        running.delete(this);
        resolve(this.exitStatus);
      });
    });
    child.stdout?.on('data', (d: Buffer) => this.take('stdout', d));
    child.stderr?.on('data', (d: Buffer) => this.take('stderr', d));
  }

  /** Starts the child (it is tracked from this moment). Throws when it cannot be spawned at all. */
  static spawn(opts: SpawnOptions): ServiceProcess {
    if (opts.command === undefined && opts.entry === undefined) throw new Error(`${opts.name}: give entry or command`);
    const command = opts.command ?? process.execPath;
    const args = opts.command === undefined ? ['--import', 'tsx', opts.entry!, ...(opts.args ?? [])] : [...(opts.args ?? [])];
    // detached: the child leads its own process group, so a group signal reaches its children too.
    const child = spawn(command, args, { cwd: opts.cwd ?? process.cwd(), env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    if (child.pid === undefined) throw new Error(`${opts.name}: could not spawn ${command}`);
    const p = new ServiceProcess(opts.name, child);
    running.add(p);
    return p;
  }

  get pid(): number {
    return this.child.pid!;
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
    return this.waitUntil(() => this.jsonLines.find(match), timeoutMs, what);
  }

  /** Resolves with the first output line (JSON or not) matching `re`. */
  waitForOutput(re: RegExp, timeoutMs = 20000): Promise<string> {
    return this.waitUntil(() => this.lines.find((l) => re.test(l)), timeoutMs, `output ${re}`);
  }

  /** Resolves once a TCP connect to 127.0.0.1:`port` succeeds. */
  async waitForPort(port: number, timeoutMs = 20000): Promise<void> {
    await this.waitUntil(() => portAnswers(port), timeoutMs, `port ${port}`);
  }

  /** Resolves once `GET url` answers `status` (default 200). */
  async waitForHttp(url: string, timeoutMs = 20000, status = 200): Promise<void> {
    await this.waitUntil(async () => (await httpStatus(url)) === status, timeoutMs, `GET ${url} → ${status}`);
  }

  /** Resolves when the child exits (no signal sent). */
  waitForExit(timeoutMs = 60000): Promise<ExitStatus> {
    return this.waitUntil(() => this.exitStatus, timeoutMs, 'exit', false);
  }

  /** SIGTERM to the group, then SIGKILL after `graceMs`; resolves with how it exited. Idempotent. */
  async stop(graceMs = DEFAULT_GRACE_MS): Promise<ExitStatus> {
    // Once the child has exited, its pid (= its group id) may be reused by another process group
    // on this shared machine, so a group is only signalled while its leader is known to run.
    if (this.exitStatus !== null) return this.exitStatus;
    signalGroup(this.pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(this.pid, 'SIGKILL'), graceMs);
    const status = await this.exited;
    clearTimeout(timer);
    signalGroup(this.pid, 'SIGKILL'); // right after its exit: anything it left in its group
    return status;
  }

  /** kill -9 of the whole group: a crash, nothing flushed. */
  async kill(): Promise<ExitStatus> {
    if (this.exitStatus === null) signalGroup(this.pid, 'SIGKILL');
    return this.exited;
  }

  /** True while any process of the child's group (the child or something it started) exists. */
  groupAlive(): boolean {
    try {
      process.kill(-this.pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  private async waitUntil<T>(fn: () => T | Promise<T>, timeoutMs: number, what: string, failOnExit = true): Promise<NonNullable<T>> {
    try {
      return await waitFor(
        async () => {
          const v = await fn();
          if (!v && failOnExit && this.exitStatus !== null) {
            throw new Error(`${this.name} exited (code ${this.exitStatus.code}, signal ${this.exitStatus.signal}) before ${what}`);
          }
          return v;
        },
        timeoutMs,
        `${this.name}: ${what}`,
      );
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      throw new Error(`${msg}\n--- ${this.name} output (tail) ---\n${this.tail()}`);
    }
  }

  private take(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    const text = this.partial[stream] + chunk.toString('utf8');
    const parts = text.split('\n');
    this.partial[stream] = parts.pop()!;
    for (const line of parts) {
      if (line === '') continue;
      this.lines.push(line);
      if (this.lines.length > MAX_KEPT_LINES) this.lines.shift();
      const json = parseJsonObject(line);
      if (json !== null) {
        this.jsonLines.push(json);
        if (this.jsonLines.length > MAX_KEPT_LINES) this.jsonLines.shift();
      }
    }
  }
}

/** Stops every child still running (SIGTERM, then SIGKILL after `graceMs`): for afterEach/after. */
export async function stopAllProcesses(graceMs = DEFAULT_GRACE_MS): Promise<void> {
  await Promise.all([...running].map((p) => p.stop(graceMs)));
}

/** Children still running; a test can assert this is empty. */
export function runningProcesses(): readonly ServiceProcess[] {
  return [...running];
}

/** True when some process with this pid exists (zombies included). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// Last resort when the test runner exits with children still up (mocha --exit, a crash):
// 'exit' handlers must be synchronous, and process.kill is.
process.on('exit', () => {
  for (const p of running) signalGroup(p.pid, 'SIGKILL');
});

function signalGroup(pid: number, signal: NodeJS.Signals): void {
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

async function httpStatus(url: string): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer().catch(() => undefined);
    return res.status;
  } catch {
    return 0;
  }
}

/** How a run-to-completion child exited and everything it printed. */
export interface CompletedRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `node --import tsx <entry> ...args` from the repository root, run to completion (CLI tools such as kvctl). */
export function runToCompletion(entry: string, args: readonly string[]): Promise<CompletedRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
