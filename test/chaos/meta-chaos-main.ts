/**
 * The MetaService chaos run (meta-chaos.ts): every fault in the middle of a big snapshot on
 * real meta-svc processes and a real redis-server, then the same snapshot without a fault on
 * both stores. Prints one JSON line per scenario, then a Markdown table; exits 1 when an
 * acknowledged write was lost or a reporter's state was not exactly its committed snapshot plus
 * its acknowledged deltas. META_CHAOS_SHORT=1 runs the short form (what `npm test` runs).
 *
 * Run: node --import tsx test/chaos/meta-chaos-main.ts
 */
import { FULL_META_CHAOS, SHORT_META_CHAOS, metaChaosMarkdown, runMetaChaos } from './meta-chaos.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';

async function main(): Promise<void> {
  const opts = { ...(process.env['META_CHAOS_SHORT'] === '1' ? SHORT_META_CHAOS : FULL_META_CHAOS), log: (l: string) => process.stderr.write(`${l}\n`) };
  const started = Date.now();
  const rows = await runMetaChaos(opts);
  for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`);
  process.stdout.write(`\n${metaChaosMarkdown(rows)}\n\n${((Date.now() - started) / 1000).toFixed(0)} s in all\n`);
  const bad = rows.some((r) => r.lost_acked > 0 || !r.reporter_exact || !r.reporter_exact_after_retry);
  process.exitCode = bad ? 1 : 0;
}

main()
  .catch((e: unknown) => {
    process.stderr.write(`meta chaos: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  })
  .finally(() => void stopAllProcesses().then(() => process.exit(process.exitCode ?? 0)));
