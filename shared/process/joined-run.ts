/**
 * One run of an async task at a time: a call while a run is in flight joins it instead of
 * starting a second, overlapping one (periodic passes whose I/O may outlast their period: the
 * subscription reconciler, the engines-file scrapers).
 */
export class JoinedRun<T> {
  private running: Promise<T> | null = null;

  constructor(private readonly task: () => Promise<T>) {}

  /** The run in flight, or a new one. */
  run(): Promise<T> {
    if (this.running !== null) return this.running;
    this.running = this.task().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** Resolves once the run in flight (if any) is over; never rejects. */
  async settled(): Promise<void> {
    await this.running?.catch(() => undefined);
  }
}
