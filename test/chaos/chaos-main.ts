/**
 * `npm run chaos`: the full chaos run (chaos-run.ts) against real processes. Prints one JSON line
 * per fault on stdout, then a Markdown table; exits 1 on any stale credit or a fault that did not
 * recover. Env: CHAOS_HOLD_MS, CHAOS_PAUSE_MS (SIGSTOP length), CHAOS_STEADY_MS, CHAOS_GRACE_MS,
 * CHAOS_RECOVER_TIMEOUT_MS, CHAOS_SEED override the full form;
 * CHAOS_SHORT=1 runs the short form `npm test` runs.
 */
import { FULL_CHAOS, SHORT_CHAOS, chaosMarkdown, runChaos, type ChaosOptions } from './chaos-run.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';

function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

async function main(): Promise<void> {
  const base = process.env['CHAOS_SHORT'] === '1' ? SHORT_CHAOS : FULL_CHAOS;
  const opts: ChaosOptions = {
    ...base,
    holdMs: envInt('CHAOS_HOLD_MS', base.holdMs),
    pauseMs: envInt('CHAOS_PAUSE_MS', base.pauseMs),
    recoverTimeoutMs: envInt('CHAOS_RECOVER_TIMEOUT_MS', base.recoverTimeoutMs),
    steadyMs: envInt('CHAOS_STEADY_MS', base.steadyMs),
    graceMs: envInt('CHAOS_GRACE_MS', base.graceMs),
    seed: envInt('CHAOS_SEED', base.seed),
  };
  const started = Date.now();
  const report = await runChaos(opts);
  for (const row of report.rows) process.stdout.write(`${JSON.stringify(row)}\n`);
  process.stdout.write(`\n${chaosMarkdown(report.rows)}\n\n`);
  process.stdout.write(`grace ${report.graceMs} ms; ${((Date.now() - started) / 1000).toFixed(0)} s in all\n`);
  for (const s of report.stale.slice(0, 20)) process.stdout.write(`STALE ${JSON.stringify(s)}\n`);
  for (const f of report.failures) process.stdout.write(`failed request: ${f}\n`);
  const bad = report.stale.length > 0 || report.rows.some((r) => r.recovery_s === null);
  process.exitCode = bad ? 1 : 0;
}

main()
  .catch((e: unknown) => {
    process.stderr.write(`chaos: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  })
  .finally(() => void stopAllProcesses().then(() => process.exit(process.exitCode ?? 0)));
