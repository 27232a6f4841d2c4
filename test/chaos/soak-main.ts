/**
 * `npm run soak`: the soak run (soak-run.ts) for SOAK_SECONDS (default 1800), memory sampled every
 * SOAK_SAMPLE_MS (default 5000). Prints the summary (Markdown) and one JSON line with the numbers;
 * exits 1 when a slope is above SOAK_MAX_SLOPE_KIB_S (default 64 KiB/s, about 225 MiB/h), the
 * index never filled, or requests failed.
 */
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { SERIES, runSoak, soakSummary } from './soak-run.js';

function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

async function main(): Promise<void> {
  const seconds = envInt('SOAK_SECONDS', 1800);
  const bound = envInt('SOAK_MAX_SLOPE_KIB_S', 64);
  const r = await runSoak({ seconds, sampleMs: envInt('SOAK_SAMPLE_MS', 5000), seed: envInt('SOAK_SEED', 11) });
  process.stdout.write(`${soakSummary(r)}\n`);
  const { samples, ...numbers } = r;
  process.stdout.write(`${JSON.stringify({ ...numbers, samples: samples.length, max_slope_kib_s: bound })}\n`);
  const steep = SERIES.filter((k) => !(Math.abs(r.slopeKiBs[k]) < bound));
  if (steep.length > 0) process.stdout.write(`memory not flat: ${steep.join(', ')} above ${bound} KiB/s\n`);
  process.exitCode = steep.length > 0 || r.fullAfterS === null || r.failed > 0 ? 1 : 0;
}

main()
  .catch((e: unknown) => {
    process.stderr.write(`soak: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  })
  .finally(() => void stopAllProcesses().then(() => process.exit(process.exitCode ?? 0)));
