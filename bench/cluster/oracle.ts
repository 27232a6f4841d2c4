/**
 * The cluster benchmark's upper reference: an omniscient router. At decision time it reads every
 * engine's true BlockPool (the prefix it holds now, per tier: the hit the engine would find if the
 * request were admitted at once) and its true queue (requests sent to it and not answered yet,
 * in transit included: counted at the decision, released at the answer), with no propagation lag,
 * and scores them with CAR's own cost function (routing.md "CAR"):
 *
 *   hit = device_hit_tokens + w · host_only_hit_tokens;  kv_hit_ratio = hit / input_tokens
 *   queue_cost = queue / max(queue over engines);        score = λ(1 − kv_hit_ratio) + (1 − λ)queue_cost
 *
 * smallest wins; exact ties go to the engine with the fewest Device blocks (its true pool), then
 * rotate — CAR's own tie rule (router-svc/policy/tie-break.ts) read from the truth. It is what CAR
 * would do with a perfect, instantaneous view — the bound in-flight load and the view stream approach.
 *
 * With a request identity (cache-identity §2, §6; oracle-identity.ts) it considers only the engines
 * that would serve the request's model, and reads each pool under the keys that engine would use.
 */
import { newRotationCursor, pickMinimumWithRotation } from '../../router-svc/policy/pick-minimum.js';
import { TIER_DEVICE } from '../../shared/keys/tier-bits.js';
import type { BlockPool } from '../../tools/engine-sim/block-pool.js';
import type { ClusterEngine } from './cluster-stack.js';
import { admissionOn, PLAIN_IDENTITY, type RequestIdentity } from './oracle-identity.js';

/** What the bench needs to route one request: where, and what to call when it is answered. */
export interface OracleChoice {
  readonly url: string;
  readonly done: () => void;
}

/**
 * The engine's own walk (BlockPool.admitPrompt): the blocks of `hashes` resident on any tier from
 * the start, split by tier, a block on both counting as Device.
 */
export function residentPrefix(pool: BlockPool, hashes: readonly bigint[]): { device: number; hostOnly: number } {
  let device = 0;
  let hostOnly = 0;
  for (const h of hashes) {
    const t = pool.tiersOf(h);
    if (t === 0) break;
    if ((t & TIER_DEVICE) !== 0) device++;
    else hostOnly++;
  }
  return { device, hostOnly };
}

export class OmniscientRouter {
  private readonly byName: ClusterEngine[];
  private readonly names: string[];
  private readonly queue: Int32Array;
  private readonly scores: Float64Array;
  private readonly deviceBlocks: Float64Array;
  private readonly cursor = newRotationCursor();
  private readonly releases: (() => void)[];

  constructor(
    engines: readonly ClusterEngine[],
    private readonly lambda: number,
    private readonly hostHitWeight = 0.5,
  ) {
    this.byName = [...engines].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.names = this.byName.map((e) => e.name);
    this.queue = new Int32Array(engines.length);
    this.scores = new Float64Array(engines.length);
    this.deviceBlocks = new Float64Array(engines.length);
    this.releases = this.byName.map((_, i) => () => void this.queue[i]!--);
  }

  choose(tokenIds: readonly number[], identity: RequestIdentity = PLAIN_IDENTITY): OracleChoice {
    const engines = this.byName;
    const blockSize = engines[0]!.sim.rank(0).pool.blockSize;
    // Engines that would refuse the model are no candidates (+Infinity never wins: one serves it).
    const admits = engines.map((e) => admissionOn(e.endpoint.models, identity));
    let maxQueue = 0;
    for (let i = 0; i < engines.length; i++) if (admits[i] !== null) maxQueue = Math.max(maxQueue, this.queue[i]!);
    // Admissions differ only by LoRA name (an engine serving the model as an adapter or as base): hash once per name.
    let hashes: bigint[] = [];
    let hashedAs: string | null | undefined;
    for (let i = 0; i < engines.length; i++) {
      const admit = admits[i] ?? null;
      if (admit === null) {
        this.scores[i] = Number.POSITIVE_INFINITY;
        continue;
      }
      const pool = engines[i]!.sim.rank(0).pool;
      if (hashedAs !== admit.loraName) {
        hashes = pool.hashesOf(tokenIds, admit);
        hashedAs = admit.loraName;
      }
      const { device, hostOnly } = residentPrefix(pool, hashes);
      const hit = (device + this.hostHitWeight * hostOnly) * blockSize;
      const ratio = tokenIds.length > 0 ? Math.min(1, hit / tokenIds.length) : 0;
      const queueCost = maxQueue === 0 ? 0 : this.queue[i]! / maxQueue;
      this.scores[i] = this.lambda * (1 - ratio) + (1 - this.lambda) * queueCost;
      this.deviceBlocks[i] = pool.deviceBlocks;
    }
    const i = pickMinimumWithRotation(this.scores, engines.length, this.names, this.cursor, this.deviceBlocks);
    this.queue[i]!++;
    return { url: engines[i]!.url, done: this.releases[i]! };
  }
}
