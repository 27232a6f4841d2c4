/**
 * The TTFT policy's upper reference (issue 27): an omniscient router with the TTFT policy's cost
 * (router-svc/policy/ttft-cost.ts) and the truth for every term, at decision time:
 *
 *   predicted_ms = max(0, busy_until − now) + prefill_us(prompt, its hits on the engine) / 1000
 *
 * - busy_until: when the engine's FIFO prefill queue drains, on the same virtual schedule the
 *   simulated engine keeps (prefill-cost-model.ts: a request starts when its slot frees and
 *   costs base + per-token · recomputed + per-host-token · host hits): every request this router
 *   sent there and its true cost. One slot per engine (the bench's engines prefill one at a time).
 * - hits: the engine's true pool now (BlockPool, a block on both tiers counting as Device), or the
 *   prefix the prompt shares with a request queued there (on Device by the time this one runs),
 *   whichever is longer;
 * - the engine's true cost model, so its true throughput.
 *
 * Ties go as the router's TTFT policy breaks them: the least own work, then the fewest Device
 * blocks (the true pool), then rotation. Requests leave the queue model when answered.
 */
import { newRotationCursor, pickMinimumWithRotation } from '../../router-svc/policy/pick-minimum.js';
import { prefillCostUs, type PrefillCostOptions } from '../../tools/engine-sim/prefill-cost-model.js';
import type { ClusterEngine } from './cluster-stack.js';
import { residentPrefix, type OracleChoice } from './oracle.js';

interface Queued {
  readonly hashes: readonly bigint[];
  done: boolean;
}

export class TtftOracle {
  private readonly byName: ClusterEngine[];
  private readonly names: string[];
  private readonly busyUntilMs: Float64Array;
  private readonly scores: Float64Array;
  private readonly work: Float64Array;
  private readonly deviceBlocks: Float64Array;
  private readonly queued: Queued[][];
  private readonly cursor = newRotationCursor();

  constructor(
    engines: readonly ClusterEngine[],
    private readonly prefill: PrefillCostOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (prefill.concurrency !== 1) throw new RangeError(`TtftOracle models one prefill slot per engine, got concurrency ${prefill.concurrency}`);
    this.byName = [...engines].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.names = this.byName.map((e) => e.name);
    this.busyUntilMs = new Float64Array(engines.length).fill(Number.NEGATIVE_INFINITY);
    this.scores = new Float64Array(engines.length);
    this.work = new Float64Array(engines.length);
    this.deviceBlocks = new Float64Array(engines.length);
    this.queued = this.byName.map(() => []);
  }

  choose(tokenIds: readonly number[]): OracleChoice {
    const engines = this.byName;
    const pool0 = engines[0]!.sim.rank(0).pool;
    const blockSize = pool0.blockSize;
    const hashes = pool0.hashesOf(tokenIds);
    const now = this.now();
    const costUs = new Float64Array(engines.length);
    for (let i = 0; i < engines.length; i++) {
      const pool = engines[i]!.sim.rank(0).pool;
      let { device, hostOnly } = residentPrefix(pool, hashes);
      // A queued request's prompt is on Device when this one is admitted after it.
      let pending = 0;
      for (const q of this.queued[i]!) if (!q.done) pending = Math.max(pending, sharedPrefix(hashes, q.hashes));
      if (pending > device + hostOnly || (pending === device + hostOnly && hostOnly > 0)) {
        device = pending;
        hostOnly = 0;
      }
      const deviceTokens = Math.min(tokenIds.length, device * blockSize);
      costUs[i] = prefillCostUs(this.prefill, tokenIds.length, deviceTokens, Math.min(tokenIds.length - deviceTokens, hostOnly * blockSize));
      const waitMs = Math.max(0, this.busyUntilMs[i]! - now);
      this.scores[i] = waitMs + costUs[i]! / 1000;
      this.work[i] = costUs[i]!;
      this.deviceBlocks[i] = pool.deviceBlocks;
    }
    // Ties: the least own work first, then the fewest Device blocks, then rotation.
    let min = Number.POSITIVE_INFINITY;
    for (let i = 0; i < engines.length; i++) min = Math.min(min, this.scores[i]!);
    let least = Number.POSITIVE_INFINITY;
    for (let i = 0; i < engines.length; i++) if (this.scores[i] === min) least = Math.min(least, this.work[i]!);
    for (let i = 0; i < engines.length; i++) if (this.scores[i] === min && this.work[i]! > least) this.scores[i] = Number.POSITIVE_INFINITY;
    const i = pickMinimumWithRotation(this.scores, engines.length, this.names, this.cursor, this.deviceBlocks);
    this.busyUntilMs[i] = Math.max(now, this.busyUntilMs[i]!) + costUs[i]! / 1000;
    const entry: Queued = { hashes, done: false };
    const list = this.queued[i]!;
    list.push(entry);
    return {
      url: engines[i]!.url,
      done: () => {
        entry.done = true;
        // Answered ones leave from the front (FIFO engines answer in order, nearly).
        while (list.length > 0 && list[0]!.done) list.shift();
      },
    };
  }
}

/** Leading blocks two prompts share. */
function sharedPrefix(a: readonly bigint[], b: readonly bigint[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
