/**
 * One process the stack runs (etcd, an engine, the directory, the router). Its stdout and stderr
 * go line by line to `<run dir>/logs/<name>.log`, and the last lines are kept in memory for error
 * messages. Each child leads its own process group so a Ctrl-C in the terminal reaches only the
 * stack, which then stops the children in order (router first, etcd last) with SIGTERM, then
 * SIGKILL after a grace period; a process 'exit' hook kills any group still alive if the stack
 * itself goes down.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';

export interface ChildSpec {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly logFile: string;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Lines kept in memory for readiness and failure messages; the log file has everything. */
const KEPT_LINES = 2000;
const POLL_MS = 50;

const live = new Set<StackChild>();

process.on('exit', () => {
  for (const c of live) c.killGroupNow();
});

export class StackChild {
  private readonly lines: string[] = [];
  private readonly log: WriteStream;
  private readonly exited: Promise<ChildExit>;
  private exitInfo: ChildExit | null = null;
  private partial = { out: '', err: '' };

  private constructor(
    readonly spec: ChildSpec,
    private readonly proc: ChildProcess,
  ) {
    this.log = createWriteStream(spec.logFile, { flags: 'a' });
    this.exited = new Promise((resolve) => {
      // 'close' (not 'exit'): the output pipes are drained by then, so the log tail is complete.
      proc.once('close', (code, signal) => {
        this.exitInfo = { code, signal };
        live.delete(this);
        this.flushPartial();
        resolve(this.exitInfo);
      });
    });
    proc.stdout?.on('data', (d: Buffer) => this.take(d, 'out'));
    proc.stderr?.on('data', (d: Buffer) => this.take(d, 'err'));
  }

  static start(spec: ChildSpec): StackChild {
    const proc = spawn(spec.command, [...spec.args], { cwd: spec.cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const child = new StackChild(spec, proc);
    if (proc.pid !== undefined) live.add(child);
    proc.once('error', (e) => {
      // ENOENT (binary missing) arrives here, not as a throw from spawn().
      child.take(Buffer.from(`spawn ${spec.command} failed: ${e.message}\n`), 'err');
      if (child.exitInfo === null) {
        child.exitInfo = { code: 127, signal: null };
        live.delete(child);
      }
    });
    return child;
  }

  get name(): string {
    return this.spec.name;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get exit(): ChildExit | null {
    return this.exitInfo;
  }

  tail(n = 20): string {
    return this.lines.slice(-n).join('\n');
  }

  /** Resolves when `ready()` holds; rejects if the child exits first or `timeoutMs` passes. */
  async waitUntil(what: string, ready: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (await ready()) return;
      if (this.exitInfo !== null) {
        throw new Error(`${this.name} exited (code ${this.exitInfo.code}, signal ${this.exitInfo.signal}) before ${what}; last lines of ${this.spec.logFile}:\n${this.tail()}`);
      }
      if (performance.now() > deadline) throw new Error(`${this.name}: no ${what} within ${timeoutMs} ms; last lines of ${this.spec.logFile}:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  /** SIGTERM to its group, SIGKILL after `graceMs`; resolves once the child has exited. */
  async stop(graceMs: number): Promise<ChildExit> {
    // Only while the child runs: after its exit its pid (= group id) may belong to someone else.
    if (this.exitInfo === null) {
      this.signalGroup('SIGTERM');
      const timer = setTimeout(() => this.signalGroup('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(timer);
      this.signalGroup('SIGKILL'); // right after its exit: anything it left in its group
    }
    await new Promise<void>((resolve) => this.log.end(() => resolve()));
    return this.exitInfo!;
  }

  /** Synchronous last resort for the process 'exit' hook. */
  killGroupNow(): void {
    this.signalGroup('SIGKILL');
  }

  private signalGroup(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch {
      // ESRCH: already gone.
    }
  }

  private take(chunk: Buffer, stream: 'out' | 'err'): void {
    if (!this.log.writableEnded) this.log.write(chunk);
    const parts = (this.partial[stream] + chunk.toString('utf8')).split('\n');
    this.partial[stream] = parts.pop()!;
    for (const line of parts) this.keep(line);
  }

  private flushPartial(): void {
    for (const stream of ['out', 'err'] as const) {
      if (this.partial[stream] !== '') this.keep(this.partial[stream]);
      this.partial[stream] = '';
    }
  }

  private keep(line: string): void {
    if (line === '') return;
    this.lines.push(line);
    if (this.lines.length > KEPT_LINES) this.lines.shift();
  }
}
