/**
 * routing.md "OpenAI-compatible proxy", pods that vanish: the candidate a request goes to when the
 * engine it was sent to vanished before answering (next-best-candidate.ts), and the in-flight
 * count moving with it (RouteDecider.retarget). The end-to-end behaviour over real processes is
 * test/integration/router-proxy.retry.test.ts.
 */
import { expect } from 'chai';
import { InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import type { CandidateExplanation, RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { nextBestPrefill } from '../../../router-svc/proxy/next-best-candidate.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { apply, snapshot, testDecider, wireInstance, wireLoad } from './view-fixtures.js';

function candidate(name: string, score: number, role: 'prefill' | 'decode' = 'prefill'): CandidateExplanation {
  return { instance_name: name, incarnation_id: 'i', role, hit_tokens: 0, device_hit_tokens: 0, host_only_hit_tokens: 0, kv_hit_ratio: 0, queue_cost: 0, score };
}

function decision(chosen: string, candidates: CandidateExplanation[]): RouteDecision {
  return { policy: 'CAR', prefill: { name: chosen, incarnation_id: 'i' }, decode: null, candidates };
}

describe('routing.md proxy: the next-best candidate after a vanished engine', () => {
  it('the smallest score among the other prefill candidates (CAR, SLO_AWARE)', () => {
    const d = decision('a', [candidate('a', 0.1), candidate('b', 0.4), candidate('c', 0.3), candidate('d', 0.2, 'decode')]);
    expect(nextBestPrefill(d, 'a')).to.equal('c');
  });

  it('equal scores (RR: all 0): the first name after the failed one, wrapping, as the rotation continues', () => {
    const rr = decision('b', [candidate('a', 0), candidate('b', 0), candidate('c', 0)]);
    expect(nextBestPrefill(rr, 'b')).to.equal('c');
    expect(nextBestPrefill(decision('c', rr.candidates), 'c')).to.equal('a');
    expect(nextBestPrefill(decision('a', [candidate('c', 0.5), candidate('a', 0), candidate('b', 0.5)]), 'a')).to.equal('b');
  });

  it('no other prefill candidate (only the failed one, or decode instances): none', () => {
    expect(nextBestPrefill(decision('a', [candidate('a', 0)]), 'a')).to.equal(null);
    expect(nextBestPrefill(decision('a', [candidate('a', 0), candidate('d', 0, 'decode')]), 'a')).to.equal(null);
  });

  it('a NaN or infinite score (no prediction) loses to any finite one but still beats nothing', () => {
    expect(nextBestPrefill(decision('a', [candidate('a', 0), candidate('b', Number.NaN), candidate('c', 7)]), 'a')).to.equal('c');
    expect(nextBestPrefill(decision('a', [candidate('a', 0), candidate('b', Number.POSITIVE_INFINITY)]), 'a')).to.equal('b');
  });

  it('the retried request is counted in flight on the new instance, and ends there once answered', async () => {
    const view = new ViewCache({ staleAfterMs: 3000 });
    const inflight = new InflightLoad({ routerId: 'me', monotonicMs: () => 1000 });
    const decider = testDecider(view, { loadBalancePolicy: 'CAR', carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null }, inflight);
    await apply(view, snapshot('e1', 1, [wireInstance('a:1', { load: wireLoad(0) }), wireInstance('b:1', { load: wireLoad(1) })], []), 0);
    const tracked = await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    expect(tracked.decision.prefill.name).to.equal('a:1');
    tracked.answered(); // the forward to a:1 failed: it no longer holds the request
    const moved = decider.retarget(tracked, 'b:1');
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
    expect(inflight.own(view.instance('b:1')!)).to.equal(1);
    moved.answered();
    expect(inflight.own(view.instance('b:1')!)).to.equal(0);
  });
});
