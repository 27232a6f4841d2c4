/**
 * The clock and timers of write sessions (kvcm-meta §6 steps 5–6), injected so tests can expire
 * a session without sleeping. `systemSessionTimers` is the real one.
 */
export interface SessionTimers {
  nowMs(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemSessionTimers: SessionTimers = {
  nowMs: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};
