/**
 * routing.md "RR and SLO_AWARE": round robin over P (and D), and SLO_AWARE predictions —
 * piecewise-linear TTFT over input tokens (extrapolating from the last two points) × (1 + waiting),
 * TPOT at the current batch (waiting + 1), candidates within the target first, no profile →
 * queue order. Predictions are hand-computed in each title.
 */
import { expect } from 'chai';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { createPolicy } from '../../../router-svc/policy/create-policy.js';
import type { CandidateExplanation, RouteDecision, RoutingPolicy } from '../../../router-svc/policy/policy-types.js';
import { linearProfile, predict } from '../../../router-svc/policy/latency-profile.js';
import type { WireViewInstance } from '../../../shared/view/view-wire.js';
import { apply, snapshot, tokens, wireInstance, wireLoad } from './view-fixtures.js';

function policy(name: 'RR' | 'SLO_AWARE', targetTtftMs: number | null = null, targetTpotMs: number | null = null): RoutingPolicy {
  return createPolicy({ loadBalancePolicy: name, carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs, targetTpotMs });
}

function byName(d: RouteDecision, name: string): CandidateExplanation {
  const c = d.candidates.find((x) => x.instance_name === name);
  if (c === undefined) throw new Error(`no candidate ${name}`);
  return c;
}

/** TTFT 10 ms at 100 tokens, 30 ms at 200, 70 ms at 400. */
const TTFT = [{ values: [100, 10] }, { values: [200, 30] }, { values: [400, 70] }];

describe('routing.md RR and SLO_AWARE', () => {
  let view: ViewCache;

  beforeEach(() => {
    view = new ViewCache({ staleAfterMs: 3000 });
  });

  async function load(instances: WireViewInstance[]): Promise<void> {
    await apply(view, snapshot('e1', 1, instances, []), 0);
  }

  describe('RR', () => {
    it('round robin over P candidates, skipping non-schedulable instances', async () => {
      await load([wireInstance('a:1'), wireInstance('b:1', { state: 'SUSPECT', schedulable: false }), wireInstance('c:1'), wireInstance('d:1', { load: null })]);
      const rr = policy('RR');
      const picks = [1, 2, 3].map(() => rr.decide({ tokenIds: null, promptTokens: 10 }, view, 1).prefill.name);
      expect(picks).to.deep.equal(['a:1', 'c:1', 'a:1']);
    });

    it('round robin over D candidates too, independently of P', async () => {
      await load([wireInstance('p:1', { type: 'PREFILL' }), wireInstance('d1:1', { type: 'DECODE' }), wireInstance('d2:1', { type: 'DECODE' }), wireInstance('d3:1', { type: 'MIX', current_role: 'DECODE' })]);
      const rr = policy('RR');
      const picks = [1, 2, 3, 4].map(() => {
        const d = rr.decide({ tokenIds: tokens(8), promptTokens: 0 }, view, 1);
        return `${d.prefill.name}>${d.decode?.name}`;
      });
      expect(picks).to.deep.equal(['p:1>d1:1', 'p:1>d2:1', 'p:1>d3:1', 'p:1>d1:1']);
    });

    it('the turn survives a candidate leaving: the next name after the last pick', async () => {
      await load([wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')]);
      const rr = policy('RR');
      expect(rr.decide({ tokenIds: null, promptTokens: 1 }, view, 1).prefill.name).to.equal('a:1');
      await load([wireInstance('a:1'), wireInstance('c:1')]);
      expect(rr.decide({ tokenIds: null, promptTokens: 1 }, view, 1).prefill.name).to.equal('c:1');
    });
  });

  describe('SLO_AWARE', () => {
    it('TTFT profile: interpolation inside, the last two points beyond, the first segment below', () => {
      const p = linearProfile([[100, 10], [200, 30], [400, 70]], 0, 1)!;
      expect(predict(p, 150)).to.equal(20); // 10 + 20·50/100
      expect(predict(p, 300)).to.equal(50); // 30 + 40·100/200
      expect(predict(p, 600)).to.equal(110); // extrapolated: 70 + 40·200/200
      expect(predict(p, 50)).to.equal(0); // 10 − 20·50/100 = 0
      expect(predict(linearProfile([[100, 10]], 0, 1)!, 900)).to.equal(10);
    });

    it('P: predicted TTFT × (1 + waiting): a 300 tokens → 50·(1+1) = 100, b → 50·(1+0) = 50 → b', async () => {
      await load([wireInstance('a:1', { ttft_profiling_data: TTFT, load: wireLoad(1) }), wireInstance('b:1', { ttft_profiling_data: TTFT, load: wireLoad(0) })]);
      const d = policy('SLO_AWARE').decide({ tokenIds: tokens(300), promptTokens: 0 }, view, 1);
      expect(d.policy).to.equal('SLO_AWARE');
      expect(d.prefill.name).to.equal('b:1');
      expect(byName(d, 'a:1')).to.include({ predicted_ms: 100, score: 100 });
      expect(byName(d, 'b:1')).to.include({ predicted_ms: 50, score: 50 });
    });

    it('P: prompt_tokens is the input length when no token ids are given (600 → 110 ms)', async () => {
      await load([wireInstance('a:1', { ttft_profiling_data: TTFT })]);
      const d = policy('SLO_AWARE').decide({ tokenIds: null, promptTokens: 600 }, view, 1);
      expect(byName(d, 'a:1').predicted_ms).to.equal(110);
    });

    it('P: candidates within --target_ttft come first; without a profile, queue order ranks between within and over target', async () => {
      // 300 tokens: a = 50·(1+2) = 150 (over 120), q (no profile, waiting 5), b = 50·(1+1) = 100 (within).
      await load([
        wireInstance('a:1', { ttft_profiling_data: TTFT, load: wireLoad(2) }),
        wireInstance('b:1', { ttft_profiling_data: TTFT, load: wireLoad(1) }),
        wireInstance('q:1', { load: wireLoad(5) }),
      ]);
      const d = policy('SLO_AWARE', 120).decide({ tokenIds: tokens(300), promptTokens: 0 }, view, 1);
      expect(d.prefill.name).to.equal('b:1');
      expect(byName(d, 'q:1')).to.include({ score: 5 });
      expect(byName(d, 'q:1').predicted_ms).to.equal(undefined);
      // Target 90: nobody profiled is within it, so the unprofiled candidate wins by queue order.
      const tight = policy('SLO_AWARE', 90).decide({ tokenIds: tokens(300), promptTokens: 0 }, view, 1);
      expect(tight.prefill.name).to.equal('q:1');
    });

    it('no profiling data anywhere: queue order (fewest waiting), ties rotate', async () => {
      await load([wireInstance('a:1', { load: wireLoad(3) }), wireInstance('b:1', { load: wireLoad(1) }), wireInstance('c:1', { load: wireLoad(1) })]);
      const slo = policy('SLO_AWARE');
      const picks = [1, 2, 3].map(() => slo.decide({ tokenIds: null, promptTokens: 10 }, view, 1).prefill.name);
      expect(picks).to.deep.equal(['b:1', 'c:1', 'b:1']);
    });

    it('D: TPOT at the current batch (waiting + 1), smallest within --target_tpot', async () => {
      // [batch, total_tokens, tpot]: 1 → 10 ms, 5 → 30 ms. d1 waiting 2 → batch 3 → 20; d2 waiting 0 → batch 1 → 10.
      const tpot = [{ values: [1, 100, 10] }, { values: [5, 500, 30] }];
      await load([
        wireInstance('p:1', { type: 'PREFILL' }),
        wireInstance('d1:1', { type: 'DECODE', tpot_profiling_data: tpot, load: wireLoad(2) }),
        wireInstance('d2:1', { type: 'DECODE', tpot_profiling_data: tpot, load: wireLoad(0) }),
      ]);
      const d = policy('SLO_AWARE', null, 15).decide({ tokenIds: tokens(8), promptTokens: 0 }, view, 1);
      expect(d.decode?.name).to.equal('d2:1');
      expect(byName(d, 'd1:1')).to.include({ role: 'decode', predicted_ms: 20 });
      expect(byName(d, 'd1:1').note).to.equal('over target');
      expect(byName(d, 'd2:1')).to.include({ role: 'decode', predicted_ms: 10 });
    });
  });
});
