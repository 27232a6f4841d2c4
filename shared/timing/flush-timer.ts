/**
 * When to run a batching flush: the one timer a batching component owns, asked either for a run
 * within a delay from now (cut a batch some time after its first change) or for a run throttled
 * against the previous one (send at once after a quiet spell, at most once per interval under
 * load). Two requests keep the earlier due time, so a latency-sensitive change can pull a
 * pending batch forward and never push one back.
 *
 * "At once" is, by the owner's choice (`soon`), either the end of the current event-loop turn
 * (setImmediate: every change of the turn goes out together, and a flush never lands between two
 * awaits of one caller's work) or a microtask, right after the code that made the change returns
 * and before the loop runs the other callbacks of its turn — on a busy loop those took
 * milliseconds, longer than the gap between two requests a router must tell the others about.
 * Changes within the interval after a run are batched by the timer either way.
 */
import { performance } from 'node:perf_hooks';

export class FlushTimer {
  private timeout: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** A queued microtask cannot be withdrawn: `cancel` moves the generation on and it finds itself stale. */
  private generation = 0;
  private dueAt = Number.POSITIVE_INFINITY;
  private lastRunAt = Number.NEGATIVE_INFINITY;
  private readonly fireQueued = (gen: number): void => {
    if (gen === this.generation) this.fire();
  };
  private readonly fire = (): void => {
    this.timeout = null;
    this.immediate = null;
    this.dueAt = Number.POSITIVE_INFINITY;
    this.lastRunAt = this.clock();
    this.run();
  };

  constructor(
    private readonly run: () => void,
    private readonly clock: () => number = () => performance.now(),
    private readonly soon: 'turn' | 'microtask' = 'turn',
  ) {}

  /** A run is scheduled. */
  get pending(): boolean {
    return this.dueAt !== Number.POSITIVE_INFINITY;
  }

  /** Run no later than `delayMs` from now. */
  within(delayMs: number): void {
    this.at(this.clock() + delayMs);
  }

  /** Run `minIntervalMs` after the previous run, or right after the current code when that is past. */
  throttled(minIntervalMs: number): void {
    this.at(Math.max(this.clock(), this.lastRunAt + minIntervalMs));
  }

  /** The owner ran the batch itself (a size cut): the pending run is dropped and the interval restarts. */
  ranNow(): void {
    this.cancel();
    this.lastRunAt = this.clock();
  }

  cancel(): void {
    if (this.timeout !== null) clearTimeout(this.timeout);
    if (this.immediate !== null) clearImmediate(this.immediate);
    this.timeout = null;
    this.immediate = null;
    this.generation++;
    this.dueAt = Number.POSITIVE_INFINITY;
  }

  private at(due: number): void {
    if (due >= this.dueAt) return;
    this.cancel();
    this.dueAt = due;
    const delay = due - this.clock();
    if (delay <= 0 && this.soon === 'turn') this.immediate = setImmediate(this.fire);
    else if (delay <= 0) {
      const gen = this.generation;
      queueMicrotask(() => this.fireQueued(gen));
    } else this.timeout = setTimeout(this.fire, delay);
  }
}
