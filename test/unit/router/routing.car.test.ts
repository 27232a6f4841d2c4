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
import { createPolicy, type CandidateExplanation, type RouteDecision, type RoutingPolicy } from '../../../router-svc/policy/policy.js';
import { NoCandidateError } from '../../../router-svc/policy/no-candidate-error.js';
import type { WireViewInstance, WireViewStream } from '../../../shared/view/view-wire.js';
import { BOTH, DEVICE, HOST, apply, blockKeys, delta, residency, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

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
});
