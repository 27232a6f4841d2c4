/**
 * The probe that decides LEASE_LOST vs SUSPECT after an instance's key is deleted
 * (discovery.md "Instance states"): `GET http://<name>/health`, up to `attempts` tries of
 * `timeoutMs` each, `intervalMs` apart (100 ms in the spec). Healthy means one 200.
 */

export interface HealthProbeOptions {
  /** `--instance_delete_probe_attempts` */
  readonly attempts: number;
  /** `--instance_delete_probe_timeout_ms` */
  readonly timeoutMs: number;
  /** Pause between attempts. */
  readonly intervalMs: number;
}

export const PROBE_INTERVAL_MS = 100;

/** True when any attempt answers 200; never throws. */
export async function probeInstanceHealth(name: string, opts: HealthProbeOptions, signal?: AbortSignal): Promise<boolean> {
  for (let attempt = 0; attempt < opts.attempts; attempt++) {
    if (signal?.aborted === true) return false;
    if (attempt > 0) await sleep(opts.intervalMs, signal);
    if (await probeOnce(name, opts.timeoutMs, signal)) return true;
  }
  return false;
}

async function probeOnce(name: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal === undefined ? timeout : AbortSignal.any([timeout, signal]);
  try {
    const res = await fetch(`http://${name}/health`, { signal: combined, redirect: 'manual' });
    // Drain the body so the socket is released; its content does not matter.
    await res.arrayBuffer().catch(() => undefined);
    return res.status === 200;
  } catch {
    // Refused, reset, timed out or aborted: an unhealthy answer, not an error of ours.
    return false;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
