/**
 * CAR's P-side tie rule (issue 15; router-svc/policy/tie-break.ts): among exactly equal score_P
 * the fewest Device blocks per DP rank in the view wins, and only candidates still equal on that
 * rotate. Token ids 1..16 with block_size 4 are blocks k0..k3; residency of k1..k3 without k0
 * gives no prefix hit (hits are continuous prefixes), so it changes usage and not the score.
 */
import { expect } from 'chai';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { createPolicy, type RouteDecision, type RoutingPolicy } from '../../../router-svc/policy/policy.js';
import type { WireViewInstance, WireViewStream } from '../../../shared/view/view-wire.js';
import { DEVICE, HOST, apply, blockKeys, delta, residency, residencyChanges, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const T16 = tokens(16);

function car(lambda = 0.5, routerId?: string): RoutingPolicy {
  return createPolicy({ loadBalancePolicy: 'CAR', carPrefillLambda: lambda, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null }, null, routerId);
}

describe('CAR ties (issue 15): fewest Device blocks in the view, then rotation', () => {
  let k: Uint8Array[];
  let view: ViewCache;

  before(async () => {
    k = await blockKeys(T16);
  });

  beforeEach(() => {
    view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
  });

  async function load(instances: WireViewInstance[], streams: WireViewStream[]): Promise<void> {
    await apply(view, snapshot('e1', 1, instances, streams), 0);
  }

  /** `n` blocks of other prompts (k1.. without k0) on Device: usage, no hit for T16. */
  function holding(id: number, name: string, n: number, over: Partial<WireViewStream> = {}): WireViewStream {
    const keys = k.slice(1, 1 + n);
    return wireStream(id, name, { ...residency(keys, keys.map(() => DEVICE)), ...over });
  }

  const decide = (policy: RoutingPolicy, nowMs = 1): RouteDecision => policy.decide({ tokenIds: T16, promptTokens: 0 }, view, nowMs);

  it('usage first: equal scores go to the fewest Device blocks, every time, and the answer says the usage decided', async () => {
    // a holds 2 blocks, b 1, c 3 (Host-only blocks are not Device usage: c's 3 on Host do not count).
    await load(
      [wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')],
      [holding(1, 'a:1', 2), holding(2, 'b:1', 1), wireStream(3, 'c:1', residency([k[1]!, k[2]!, k[3]!], [HOST, HOST, DEVICE]))],
    );
    const policy = car();
    const decisions = [1, 2, 3].map(() => decide(policy));
    // Scores all .5 (no hit, idle queues); b and c hold 1 Device block each: rotation between them.
    expect(decisions.map((d) => d.prefill.name)).to.deep.equal(['b:1', 'c:1', 'b:1']);
    await apply(view, delta('e1', 2, { residency: [residencyChanges(3, [k[1]!], [DEVICE])] }), 1);
    // k1 moves to Device on c, which now holds 2 Device blocks: b alone is the fewest.
    const d = decide(policy);
    expect(d.prefill.name).to.equal('b:1');
    expect(d.tie_break).to.deep.equal({
      decided_by: 'kv_usage',
      rotated_among: 1,
      tied: [
        { instance_name: 'a:1', device_blocks_per_rank: 2 },
        { instance_name: 'b:1', device_blocks_per_rank: 1 },
        { instance_name: 'c:1', device_blocks_per_rank: 2 },
      ],
    });
    // The scores the operator reads are unchanged by the rule.
    for (const c of d.candidates) expect(c).to.include({ kv_hit_ratio: 0, queue_cost: 0, score: 0.5 });
  });

  it('rotation among those still equal on usage; candidates with a better score are not ties at all', async () => {
    // d waits 1 (score .5 + .5 = 1): out. a, b, c idle and empty: rotate a, b, c, a.
    await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1'), wireInstance('d:1', { load: wireLoad(1) })], [holding(4, 'd:1', 0)]);
    const policy = car();
    const decisions = [1, 2, 3, 4].map(() => decide(policy));
    expect(decisions.map((d) => d.prefill.name)).to.deep.equal(['a:1', 'b:1', 'c:1', 'a:1']);
    expect(decisions[0]!.tie_break).to.deep.equal({
      decided_by: 'rotation',
      rotated_among: 3,
      tied: ['a:1', 'b:1', 'c:1'].map((instance_name) => ({ instance_name, device_blocks_per_rank: 0 })),
    });
  });

  it('successive decisions rotate with equal usage, and a decision the usage settles does not skip a turn', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [holding(1, 'a:1', 1), holding(2, 'b:1', 1), holding(3, 'c:1', 1)]);
    const policy = car();
    const picks = [decide(policy).prefill.name, decide(policy).prefill.name];
    expect(picks).to.deep.equal(['a:1', 'b:1']);
    // c loses its block: usage decides (c), the cursor stays after b.
    await apply(view, delta('e1', 2, { residency: [residencyChanges(3, [k[1]!], [0])] }), 1);
    expect(decide(policy).prefill.name).to.equal('c:1');
    await apply(view, delta('e1', 3, { residency: [residencyChanges(3, [k[1]!], [DEVICE])] }), 1);
    // Equal again: c's turn comes next, as it would have without the usage-settled decision.
    expect([1, 2, 3].map(() => decide(policy).prefill.name)).to.deep.equal(['c:1', 'a:1', 'b:1']);
  });

  it('replicas with different rotation histories agree whenever the usage decides', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [holding(1, 'a:1', 1), holding(2, 'b:1', 1), holding(3, 'c:1', 1)]);
    const replicas = [car(), car(), car()];
    // Their cursors end on a, b and c.
    replicas.forEach((r, i) => {
      for (let j = 0; j <= i; j++) decide(r);
    });
    await apply(view, delta('e1', 2, { residency: [residencyChanges(2, [k[1]!], [0])] }), 1);
    expect(replicas.map((r) => decide(r).prefill.name)).to.deep.equal(['b:1', 'b:1', 'b:1']);
  });

  it('usage is per DP rank, of synchronized streams of the current registration', async () => {
    // m: 2 ranks holding 3 + 1 → 2 per rank; n: 1 rank holding 3 → 3; o: 3 blocks in a stream of
    // an old incarnation and 3 in an unsynchronized one → 0 known. Scores all .5 → o, then m.
    await load(
      [wireInstance('m:1', { dp_size: 2 }), wireInstance('n:1'), wireInstance('o:1', { dp_size: 2 })],
      [
        holding(1, 'm:1', 3, { dp_rank: 0 }),
        holding(2, 'm:1', 1, { dp_rank: 1 }),
        holding(3, 'n:1', 3),
        holding(4, 'o:1', 3, { dp_rank: 0, incarnation_id: 'old' }),
        holding(5, 'o:1', 3, { dp_rank: 1, synchronized: false, error: 'gap' }),
      ],
    );
    const d = decide(car());
    expect(d.prefill.name).to.equal('o:1');
    expect(d.tie_break?.tied).to.deep.equal([
      { instance_name: 'm:1', device_blocks_per_rank: 2 },
      { instance_name: 'n:1', device_blocks_per_rank: 3 },
      { instance_name: 'o:1', device_blocks_per_rank: 0 },
    ]);
  });

  it('no tie, no tie_break; a stale view gives no usage key and the tie rotates, saying why', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1', { load: wireLoad(2) })], [holding(1, 'a:1', 3), holding(2, 'b:1', 0)]);
    const policy = car();
    const clear = decide(policy);
    expect(clear.prefill.name).to.equal('a:1');
    expect(clear).to.not.have.property('tie_break');
    await apply(view, delta('e1', 2, { instance_upserts: [wireInstance('b:1')] }), 1);
    // Fresh: b (0 blocks) beats a (3). Stale: no key, rotation from the start (a).
    expect(decide(policy).prefill.name).to.equal('b:1');
    const stale = decide(policy, STALE_AFTER_MS + 1);
    expect(stale.prefill.name).to.equal('a:1');
    expect(stale.tie_break).to.deep.equal({
      decided_by: 'rotation',
      rotated_among: 2,
      tied: [{ instance_name: 'a:1' }, { instance_name: 'b:1' }],
      note: 'directory view stale: no usage key',
    });
  });

  it('replicas started together begin rotating where their router ids put them, then go on in name order', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], []);
    // rotationOffset mod 3: router-1 → 1, router-2 → 2, router-3 → 0; no id → the first name.
    const picks = (policy: RoutingPolicy): string[] => [1, 2, 3, 4].map(() => decide(policy).prefill.name);
    expect(picks(car(0.5, 'router-1'))).to.deep.equal(['b:1', 'c:1', 'a:1', 'b:1']);
    expect(picks(car(0.5, 'router-2'))).to.deep.equal(['c:1', 'a:1', 'b:1', 'c:1']);
    expect(picks(car(0.5, 'router-3'))).to.deep.equal(['a:1', 'b:1', 'c:1', 'a:1']);
    expect(picks(car(0.5))).to.deep.equal(['a:1', 'b:1', 'c:1', 'a:1']);
    // The offset counts among the candidates still equal after the usage key (b holds a block:
    // a, c; router-2's offset is odd → the second of them).
    await apply(view, snapshot('e2', 1, [wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [holding(1, 'b:1', 1)]), 1);
    expect(decide(car(0.5, 'router-2')).prefill.name).to.equal('c:1');
    expect(decide(car(0.5, 'router-3')).prefill.name).to.equal('a:1');
  });
});
