/**
 * routing.md "Candidates" and "CAR": every rule with hand-computed scores. Token ids 1..16 with
 * block_size 4 are 4 blocks k0..k3 (input_tokens = 16).
 *
 *   hit = min over DP ranks of (device + w · host_only);  kv_hit_ratio = clamp(hit / 16, 0, 1)
 *   queue_cost = waiting / max waiting over P;             score_P = λ(1 − ratio) + (1 − λ)queue_cost
 *   score_D = gpu_cache_usage_perc + waiting / max waiting over D
 */
import { expect } from 'chai';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { createPolicy } from '../../../router-svc/policy/create-policy.js';
import type { CandidateExplanation, RouteDecision, RoutingPolicy } from '../../../router-svc/policy/policy-types.js';
import { NoCandidateError } from '../../../router-svc/policy/no-candidate-error.js';
import type { WireViewInstance, WireViewStream } from '../../../shared/view/view-wire.js';
import { BOTH, DEVICE, HOST, apply, blockKeys, delta, residency, residencyChanges, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const T16 = tokens(16);

function car(lambda: number, hostWeight: number): RoutingPolicy {
  return createPolicy({ loadBalancePolicy: 'CAR', carPrefillLambda: lambda, carHostHitWeight: hostWeight, targetTtftMs: null, targetTpotMs: null });
}

function byName(d: RouteDecision, name: string): CandidateExplanation {
  const c = d.candidates.find((x) => x.instance_name === name);
  if (c === undefined) throw new Error(`no candidate ${name} in ${JSON.stringify(d.candidates)}`);
  return c;
}

describe('routing.md CAR', () => {
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

  /**
   * a:1 waiting 2, k0 k1 on Device                → device 8, host_only 0
   * b:1 waiting 4, k0 Device, k1..k3 Host only   → device 4, host_only 12
   * c:1 waiting 1, nothing                        → 0
   * queue_cost: a 2/4 = 0.5, b 4/4 = 1, c 1/4 = 0.25
   */
  async function threeDefaults(): Promise<void> {
    await load(
      [wireInstance('a:1', { load: wireLoad(2) }), wireInstance('b:1', { load: wireLoad(4) }), wireInstance('c:1', { load: wireLoad(1) })],
      [
        wireStream(1, 'a:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE])),
        wireStream(2, 'b:1', residency([k[0]!, k[1]!, k[2]!, k[3]!], [DEVICE, HOST, HOST, HOST])),
        wireStream(3, 'c:1'),
      ],
    );
  }

  it('λ=0.5, w=0.5: a = .5·(1−8/16) + .5·.5 = .5; b = .5·(1−10/16) + .5·1 = .6875; c = .5·1 + .5·.25 = .625 → a', async () => {
    await threeDefaults();
    const d = car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(d.policy).to.equal('CAR');
    expect(d.prefill).to.deep.equal({ name: 'a:1', incarnation_id: 'inc-a:1' });
    expect(d.decode).to.equal(null);
    expect(byName(d, 'a:1')).to.deep.equal({
      instance_name: 'a:1', incarnation_id: 'inc-a:1', role: 'prefill', hit_tokens: 8, device_hit_tokens: 8, host_only_hit_tokens: 0, kv_hit_ratio: 0.5, queue_cost: 0.5, score: 0.5,
      // routing.md "In-flight load": the waiting behind queue_cost, by part (no in-flight load here).
      waiting_reported: 2, waiting_inflight_own: 0, waiting_inflight_other: 0,
    });
    expect(byName(d, 'b:1')).to.include({ hit_tokens: 10, device_hit_tokens: 4, host_only_hit_tokens: 12, kv_hit_ratio: 0.625, queue_cost: 1, score: 0.6875 });
    expect(byName(d, 'c:1')).to.include({ hit_tokens: 0, kv_hit_ratio: 0, queue_cost: 0.25, score: 0.625 });
  });

  it('λ=1 compares only cache misses: a = 1−.5 = .5, b = 1−.625 = .375, c = 1 → b', async () => {
    await threeDefaults();
    const d = car(1, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(d.prefill.name).to.equal('b:1');
    expect([byName(d, 'a:1').score, byName(d, 'b:1').score, byName(d, 'c:1').score]).to.deep.equal([0.5, 0.375, 1]);
  });

  it('λ=0 compares only queues: a = .5, b = 1, c = .25 → c', async () => {
    await threeDefaults();
    const d = car(0, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(d.prefill.name).to.equal('c:1');
    expect([byName(d, 'a:1').score, byName(d, 'b:1').score, byName(d, 'c:1').score]).to.deep.equal([0.5, 1, 0.25]);
  });

  it('host hit weight: λ=1, w=1 → b hit 4+12 = 16, ratio 1, score 0; w=0 → b hit 4, score .75, a wins at .5', async () => {
    await threeDefaults();
    const full = car(1, 1).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(full.prefill.name).to.equal('b:1');
    expect(byName(full, 'b:1')).to.include({ hit_tokens: 16, kv_hit_ratio: 1, score: 0 });
    const none = car(1, 0).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(none.prefill.name).to.equal('a:1');
    expect(byName(none, 'b:1')).to.include({ hit_tokens: 4, kv_hit_ratio: 0.25, score: 0.75 });
  });

  it('a block on both tiers counts once, as Device: k0 k1 on Device and Host → hit 8, not 8 + .5·8', async () => {
    await load([wireInstance('a:1')], [wireStream(1, 'a:1', residency([k[0]!, k[1]!], [BOTH, BOTH]))]);
    const d = car(1, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    // λ=1: 1 − 8/16 = .5.
    expect(byName(d, 'a:1')).to.include({ hit_tokens: 8, device_hit_tokens: 8, host_only_hit_tokens: 0, kv_hit_ratio: 0.5, score: 0.5 });
  });

  it('DP minimum: a 2-rank instance gets the minimum over its ranks, never the best rank or the sum', async () => {
    // m:1 rank0 k0..k2 Device (12), rank1 k0 Device (4) → min 4 (not 12, not 16).
    // n:1 rank0 k0,k1 Device + k2 Host (8 + .5·4 = 10), rank1 k0..k2 Device (12) → min 10 (device 8, host_only 4).
    await load(
      [wireInstance('m:1', { dp_size: 2 }), wireInstance('n:1', { dp_size: 2 })],
      [
        wireStream(1, 'm:1', { ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, DEVICE]), dp_rank: 0 }),
        wireStream(2, 'm:1', { ...residency([k[0]!], [DEVICE]), dp_rank: 1 }),
        wireStream(3, 'n:1', { ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, HOST]), dp_rank: 0 }),
        wireStream(4, 'n:1', { ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, DEVICE]), dp_rank: 1 }),
      ],
    );
    // λ=1, waiting all 0: m = 1 − 4/16 = .75, n = 1 − 10/16 = .375 → n.
    const d = car(1, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(byName(d, 'm:1')).to.include({ hit_tokens: 4, device_hit_tokens: 4, host_only_hit_tokens: 0, kv_hit_ratio: 0.25, score: 0.75 });
    expect(byName(d, 'n:1')).to.include({ hit_tokens: 10, device_hit_tokens: 8, host_only_hit_tokens: 4, kv_hit_ratio: 0.625, score: 0.375 });
    expect(d.prefill.name).to.equal('n:1');
  });

  it('DP minimum: the walk stops once every instance’s minimum is fixed, with the same decision and counts', async () => {
    // 16 blocks; m:1 rank0 holds all 16, rank1 k0 k1 → min 2 blocks (8 tokens). Rank 0 is above
    // that for good after block 2, so the walk ends there instead of after block 16.
    const t64 = tokens(64);
    const k16 = await blockKeys(t64);
    await load([wireInstance('m:1', { dp_size: 2 })], [
      wireStream(1, 'm:1', { ...residency(k16, k16.map(() => DEVICE)), dp_rank: 0 }),
      wireStream(2, 'm:1', { ...residency([k16[0]!, k16[1]!], [DEVICE, HOST]), dp_rank: 1 }),
    ]);
    const d = car(1, 0.5).decide({ tokenIds: t64, promptTokens: 0 }, view, 1);
    expect(byName(d, 'm:1')).to.include({ hit_tokens: 6, device_hit_tokens: 4, host_only_hit_tokens: 4 });
    expect(view.lastHashedBlocks, 'DP-minimum walk').to.equal(3);
    // The query endpoint's exact walk still gives rank 0 its whole prefix.
    const exact = view.query(t64, 1);
    expect(exact.matches.map((m) => m.device_hit_tokens + m.host_only_hit_tokens)).to.deep.equal([64, 8]);
    expect(view.lastHashedBlocks, 'exact walk').to.equal(16);
  });

  it('DP minimum follows the view: a dp_size change between two decisions changes which ranks count', async () => {
    // m:1 rank0 k0..k2 Device (12), rank1 nothing. dp_size 2 → min 0; dp_size 1 → rank 0 alone, 12.
    await load([wireInstance('m:1', { dp_size: 2 })], [
      wireStream(1, 'm:1', { ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, DEVICE]), dp_rank: 0 }),
      wireStream(2, 'm:1', { dp_rank: 1 }),
    ]);
    const policy = car(1, 0.5);
    expect(byName(policy.decide({ tokenIds: T16, promptTokens: 0 }, view, 1), 'm:1').hit_tokens).to.equal(0);
    await apply(view, delta('e1', 2, { instance_upserts: [wireInstance('m:1', { dp_size: 1 })] }), 1);
    expect(byName(policy.decide({ tokenIds: T16, promptTokens: 0 }, view, 1), 'm:1').hit_tokens).to.equal(12);
  });

  it('an unsynchronized rank, or a missing rank, makes the hit 0; the instance stays a candidate by queue cost', async () => {
    // u:1 rank1 unsynchronized; v:1 dp_size 2 with only rank 0; w:1 no hits, waiting 4.
    await load(
      [wireInstance('u:1', { dp_size: 2 }), wireInstance('v:1', { dp_size: 2 }), wireInstance('w:1', { load: wireLoad(4) })],
      [
        wireStream(1, 'u:1', { ...residency([k[0]!, k[1]!], [DEVICE, DEVICE]), dp_rank: 0 }),
        wireStream(2, 'u:1', { ...residency([k[0]!], [DEVICE]), dp_rank: 1, synchronized: false, error: 'gap: x' }),
        wireStream(3, 'v:1', { ...residency([k[0]!, k[1]!], [DEVICE, DEVICE]), dp_rank: 0 }),
        wireStream(4, 'w:1'),
      ],
    );
    // λ=.5: u = .5·1 + .5·0 = .5, v = .5, w = .5·1 + .5·1 = 1.
    const d = car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(byName(d, 'u:1')).to.include({ hit_tokens: 0, kv_hit_ratio: 0, queue_cost: 0, score: 0.5 });
    expect(byName(d, 'u:1').note).to.match(/not synchronized/);
    expect(byName(d, 'v:1')).to.include({ hit_tokens: 0, score: 0.5 });
    expect(byName(d, 'v:1').note).to.match(/no stream/);
    expect(byName(d, 'w:1')).to.include({ score: 1 });
    expect(['u:1', 'v:1']).to.include(d.prefill.name);
  });

  it('a stream of another incarnation (or, without incarnations, another registration) gives no credit', async () => {
    await load(
      [
        wireInstance('a:1', { incarnation_id: 'new' }),
        wireInstance('b:1', { incarnation_id: '', generation: '2' }),
        wireInstance('c:1', { incarnation_id: '', generation: '2', load: wireLoad(1) }),
      ],
      [
        wireStream(1, 'a:1', { ...residency([k[0]!, k[1]!], [DEVICE, DEVICE]), incarnation_id: 'old' }),
        wireStream(2, 'b:1', { ...residency([k[0]!, k[1]!], [DEVICE, DEVICE]), incarnation_id: '', generation: '1' }),
        wireStream(3, 'c:1', { ...residency([k[0]!], [DEVICE]), incarnation_id: '', generation: '2' }),
      ],
    );
    // λ=1: a = 1, b = 1 (stale identity), c = 1 − 4/16 = .75 → c.
    const d = car(1, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(byName(d, 'a:1')).to.include({ hit_tokens: 0, score: 1 });
    expect(byName(d, 'a:1').note).to.match(/incarnation/);
    expect(byName(d, 'b:1')).to.include({ hit_tokens: 0, score: 1 });
    expect(byName(d, 'c:1')).to.include({ hit_tokens: 4, score: 0.75 });
    expect(d.prefill.name).to.equal('c:1');
  });

  it('stale view: hit ratios are 0 and the queue decides', async () => {
    await threeDefaults();
    const d = car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, STALE_AFTER_MS + 1);
    for (const c of d.candidates) expect(c).to.include({ hit_tokens: 0, kv_hit_ratio: 0 });
    // a = .5 + .25 = .75, b = .5 + .5 = 1, c = .5 + .125 = .625 → c.
    expect(d.prefill.name).to.equal('c:1');
    expect(byName(d, 'a:1').note).to.match(/stale/);
  });

  it('kv_hit_ratio is 0 when input_tokens is 0, and queue_cost is 0 when every waiting count is 0', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1')], [wireStream(1, 'a:1', residency([k[0]!], [DEVICE])), wireStream(2, 'b:1')]);
    const d = car(0.5, 0.5).decide({ tokenIds: [], promptTokens: 0 }, view, 1);
    for (const c of d.candidates) expect(c).to.include({ kv_hit_ratio: 0, queue_cost: 0, score: 0.5 });
    // A request known only by its length gets no prefix credit either.
    const byLength = car(1, 0.5).decide({ tokenIds: null, promptTokens: 16 }, view, 1);
    for (const c of byLength.candidates) expect(c).to.include({ kv_hit_ratio: 0, score: 1 });
  });

  it('Ties: exactly equal scores rotate — successive decisions pick the tied candidates in turn', async () => {
    await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1', { load: wireLoad(3) })], []);
    const policy = car(0.5, 0.5);
    // a = b = .5·1 + .5·0 = .5; c = .5 + .5 = 1.
    const picks = [1, 2, 3, 4].map(() => policy.decide({ tokenIds: T16, promptTokens: 0 }, view, 1).prefill.name);
    expect(picks).to.deep.equal(['a:1', 'b:1', 'a:1', 'b:1']);
  });

  it('D side: score_D = gpu_cache_usage_perc + waiting / max waiting; P and D chosen together', async () => {
    // d1: .5 + 2/4 = 1; d2: .25 + 4/4 = 1.25; m (MIX acting as DECODE): .75 + 0 = .75 → m.
    await load(
      [
        wireInstance('p:1', { type: 'PREFILL' }),
        wireInstance('x:1', { type: 'MIX', current_role: 'PREFILL', load: wireLoad(1) }),
        wireInstance('d1:1', { type: 'DECODE', load: wireLoad(2, 0.5) }),
        wireInstance('d2:1', { type: 'DECODE', load: wireLoad(4, 0.25) }),
        wireInstance('m:1', { type: 'MIX', current_role: 'DECODE', load: wireLoad(0, 0.75) }),
      ],
      [wireStream(1, 'p:1', residency([k[0]!], [DEVICE]))],
    );
    const d = car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    // p = .5·(1 − 4/16) + .5·0 = .375; x = .5 + .5·1 = 1 → p.
    expect(d.prefill.name).to.equal('p:1');
    expect(byName(d, 'p:1')).to.include({ role: 'prefill', score: 0.375 });
    expect(byName(d, 'x:1')).to.include({ role: 'prefill', score: 1 });
    expect(d.decode).to.deep.equal({ name: 'm:1', incarnation_id: 'inc-m:1' });
    expect(byName(d, 'd1:1')).to.include({ role: 'decode', queue_cost: 0.5, score: 1, hit_tokens: 0 });
    expect(byName(d, 'd2:1')).to.include({ role: 'decode', queue_cost: 1, score: 1.25 });
    expect(byName(d, 'm:1')).to.include({ role: 'decode', queue_cost: 0, score: 0.75 });
  });

  it('Candidates: with no D candidate, P is restricted to DEFAULT (PREFILL and MIX-as-PREFILL cannot serve alone)', async () => {
    await load(
      [wireInstance('p:1', { type: 'PREFILL' }), wireInstance('x:1', { type: 'MIX', current_role: 'PREFILL' }), wireInstance('z:1', { load: wireLoad(9) })],
      [wireStream(1, 'p:1', residency([k[0]!, k[1]!, k[2]!, k[3]!], [DEVICE, DEVICE, DEVICE, DEVICE]))],
    );
    const d = car(1, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(d.prefill.name).to.equal('z:1');
    expect(d.decode).to.equal(null);
    expect(d.candidates.map((c) => c.instance_name)).to.deep.equal(['z:1']);
  });

  it('Candidates: only schedulable (ACTIVE or LEASE_LOST), not SUSPECT, with a valid load report', async () => {
    await load(
      [
        wireInstance('a:1', { state: 'LEASE_LOST' }),
        wireInstance('b:1', { state: 'SUSPECT', schedulable: false }),
        wireInstance('c:1', { load: null }),
        wireInstance('d:1'),
      ],
      [],
    );
    const d = car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
    expect(d.candidates.map((c) => c.instance_name)).to.deep.equal(['a:1', 'd:1']);
  });

  describe('no candidate → 503 with a clear reason', () => {
    const cases: [string, () => WireViewInstance[], RegExp][] = [
      ['an empty view', () => [], /no instance in the directory view/],
      ['every instance SUSPECT or without load', () => [wireInstance('a:1', { state: 'SUSPECT', schedulable: false }), wireInstance('b:1', { load: null })], /none of 2 instances is schedulable/],
      ['PREFILL only, no D and no DEFAULT', () => [wireInstance('p:1', { type: 'PREFILL' })], /no decode candidate and no DEFAULT instance to serve alone \(prefill-only candidates: p:1\)/],
      ['DECODE only', () => [wireInstance('d:1', { type: 'DECODE' })], /no prefill candidate.*decode candidates: d:1/],
    ];
    for (const [title, instances, reason] of cases) {
      it(title, async () => {
        await load(instances(), []);
        let err: unknown = null;
        try {
          car(0.5, 0.5).decide({ tokenIds: T16, promptTokens: 0 }, view, 1);
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(NoCandidateError);
        const e = err as NoCandidateError;
        expect(e.class).to.equal('no_candidate');
        expect(e.httpStatus).to.equal(503);
        expect(e.reason).to.match(reason);
        expect(e.message).to.equal(`no_candidate: ${e.reason}`);
      });
    }
  });

  /**
   * Issue 15, which wins over "Ties" where they differ (router-svc/policy/tie-break.ts): among
   * exactly equal score_P the fewest Device blocks per DP rank in the view wins, and only those
   * still equal rotate. Residency of k1..k3 without k0 gives no hit for T16 (hits are continuous
   * prefixes), so it changes usage and not the score.
   */
  describe('Ties across replicas: fewest Device blocks in the view, then rotation', () => {
    const tieCar = (routerId?: string): RoutingPolicy =>
      createPolicy({ loadBalancePolicy: 'CAR', carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null }, null, routerId);

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
      const policy = tieCar();
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
      const policy = tieCar();
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
      const policy = tieCar();
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
      const replicas = [tieCar(), tieCar(), tieCar()];
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
      const d = decide(tieCar());
      expect(d.prefill.name).to.equal('o:1');
      expect(d.tie_break?.tied).to.deep.equal([
        { instance_name: 'm:1', device_blocks_per_rank: 2 },
        { instance_name: 'n:1', device_blocks_per_rank: 3 },
        { instance_name: 'o:1', device_blocks_per_rank: 0 },
      ]);
    });

    it('one policy across view changes: a stream gone unsynchronized or re-registered stops counting at the next tie', async () => {
      // a: 1 Device block, b: 2, c: 3 → a. Then a's stream loses sync (0 known) while b's and c's stay.
      await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [holding(1, 'a:1', 1), holding(2, 'b:1', 2), holding(3, 'c:1', 3)]);
      const policy = tieCar();
      const keys = (d: RouteDecision): unknown => d.tie_break?.tied.map((t) => t.device_blocks_per_rank);
      expect(keys(decide(policy))).to.deep.equal([1, 2, 3]);
      await apply(view, delta('e1', 2, { stream_upserts: [wireStream(1, 'a:1', { synchronized: false, error: 'gap' })] }), 1);
      expect(keys(decide(policy))).to.deep.equal([0, 2, 3]);
      // c registers again (new incarnation): its stream of the old one no longer counts.
      await apply(view, delta('e1', 3, { instance_upserts: [wireInstance('c:1', { incarnation_id: 'inc-c-2' })] }), 1);
      expect(keys(decide(policy))).to.deep.equal([0, 2, 0]);
    });

    it('no tie, no tie_break; a stale view gives no usage key and the tie rotates, saying why', async () => {
      await load([wireInstance('a:1'), wireInstance('b:1', { load: wireLoad(2) })], [holding(1, 'a:1', 3), holding(2, 'b:1', 0)]);
      const policy = tieCar();
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
      expect(picks(tieCar('router-1'))).to.deep.equal(['b:1', 'c:1', 'a:1', 'b:1']);
      expect(picks(tieCar('router-2'))).to.deep.equal(['c:1', 'a:1', 'b:1', 'c:1']);
      expect(picks(tieCar('router-3'))).to.deep.equal(['a:1', 'b:1', 'c:1', 'a:1']);
      expect(picks(tieCar())).to.deep.equal(['a:1', 'b:1', 'c:1', 'a:1']);
      // The offset counts among the candidates still equal after the usage key (b holds a block:
      // a, c; router-2's offset is odd → the second of them).
      await apply(view, snapshot('e2', 1, [wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [holding(1, 'b:1', 1)]), 1);
      expect(decide(tieCar('router-2')).prefill.name).to.equal('c:1');
      expect(decide(tieCar('router-3')).prefill.name).to.equal('a:1');
    });
  });
});
