/**
 * Pending prefix credit (routing.md "In-flight load", our extension `--car_pending_prefix`): a
 * prompt routed to an instance and still in flight there credits the prefix later prompts share
 * with it on that instance, before its KV events reach the view — this router's decisions at
 * once, the other replicas' through the view's in-flight shares.
 *
 * View: a:1 and b:1, DEFAULT, idle, one synchronized empty stream each (block size 4), λ = 0.8:
 * with nothing resident every score is 0.8 + 0.2 · queue_cost.
 */
import { expect } from 'chai';
import { INFLIGHT_TTL_MS, InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import type { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { fingerprintBytes, promptFingerprints } from '../../../shared/keys/prompt-fingerprint.js';
import type { WireInflightShare, WireViewInstance } from '../../../shared/view/view-wire.js';
import { apply, delta, snapshot, testDecider, tokens, wireInstance, wireLoad, wireStream, explained } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const ME = 'router-me';
const FLAGS = { loadBalancePolicy: 'CAR', carPrefillLambda: 0.8, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null } as const;

function instance(name: string, inflight: WireInflightShare[] = [], over: Partial<WireViewInstance> = {}): WireViewInstance {
  return wireInstance(name, { load: { ...wireLoad(0), reported_at_ms: '10' }, inflight, incarnation_id: `inc-${name}`, ...over });
}

const other = (name: string, prompt: readonly number[]): WireViewInstance =>
  instance(name, [{ router_id: 'router-x', count: 1, prompts: [fingerprintBytes(promptFingerprints(prompt))] }]);

describe('routing.md In-flight load: pending prefix credit (--car_pending_prefix)', () => {
  let mono: number;
  let view: ViewCache;
  let inflight: InflightLoad;
  let version: number;
  const P = tokens(64); // 4 granules, 16 blocks of 4
  const P_EXTENDED = [...tokens(50), 9001, 9002, 9003, 9004, 9005, 9006]; // shares 50 tokens: 3 granules (48)

  const decider = (pendingPrefix = true): RouteDecider => {
    return testDecider(view, FLAGS, inflight, pendingPrefix);
  };

  beforeEach(async () => {
    mono = 1000;
    version = 1;
    view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    inflight = new InflightLoad({ routerId: ME, monotonicMs: () => mono });
    await apply(view, snapshot('e1', 1, [instance('a:1'), instance('b:1')], [wireStream(1, 'a:1'), wireStream(2, 'b:1')]), 0);
  });

  async function upsert(...instances: WireViewInstance[]): Promise<void> {
    version++;
    await apply(view, delta('e1', version, { instance_upserts: instances }), 0);
  }

  it("own decisions: a prompt still in flight credits its shared prefix on its instance (whole granules, floored to blocks), explained as pending_hit_tokens", () => {
    const d = decider();
    const first = d.decide({ tokenIds: P, promptTokens: 0 }, 0);
    const there = first.prefill.name;
    const elsewhere = there === 'a:1' ? 'b:1' : 'a:1';
    expect(explained(first, there).pending_hit_tokens).to.equal(0);
    const second = d.decide({ tokenIds: P_EXTENDED, promptTokens: 0 }, 0);
    // 0.8 · (1 − 48/56) + 0.2 · 1 against 0.8 · 1 + 0: the queued prefix wins over the idle instance.
    expect(second.prefill.name).to.equal(there);
    expect(explained(second, there)).to.include({ pending_hit_tokens: 48, hit_tokens: 48, device_hit_tokens: 0, waiting_inflight_own: 1 });
    expect(explained(second, elsewhere)).to.include({ pending_hit_tokens: 0, hit_tokens: 0 });
  });

  it('an answered request ends its credit (its KV events are the view\'s from then on); so do a newer load report and the TTL', async () => {
    const d = decider();
    const first = await d.decideTracked({ tokenIds: P, promptTokens: 0 }, 0);
    const there = first.decision.prefill.name;
    first.answered();
    expect(explained(d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0), there).pending_hit_tokens).to.equal(0);
    const counted = d.decide({ tokenIds: P, promptTokens: 0 }, 0).prefill.name;
    mono += INFLIGHT_TTL_MS - 1;
    expect(explained(d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0), counted).pending_hit_tokens).to.equal(64);
    mono += 1;
    expect(explained(d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0), counted).pending_hit_tokens).to.equal(0);
    d.decide({ tokenIds: P, promptTokens: 0 }, 0);
    await upsert(instance('a:1', [], { load: { ...wireLoad(0), reported_at_ms: '11' } }), instance('b:1', [], { load: { ...wireLoad(0), reported_at_ms: '11' } }));
    const after = d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
    expect(after.candidates.map((c) => c.pending_hit_tokens)).to.deep.equal([0, 0]);
  });

  it("other replicas' prompts come through the view's in-flight shares; this router's own share coming back is skipped", async () => {
    await upsert(other('b:1', P));
    const d = decider();
    const r = d.decide({ tokenIds: P, promptTokens: 0 }, 0);
    expect(r.prefill.name).to.equal('b:1');
    expect(explained(r, 'b:1')).to.include({ pending_hit_tokens: 64, waiting_inflight_other: 1 });
    await upsert(instance('a:1', [{ router_id: ME, count: 1, prompts: [fingerprintBytes(promptFingerprints(P))] }]), instance('b:1'));
    // a's share is this router's own (it never routed there): not counted, no credit.
    const again = d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
    expect(explained(again, 'a:1').pending_hit_tokens).to.equal(0);
  });

  it('no credit on a stale view (no cache credit at all) or on an instance with dp_size > 1 (the engine picks the rank)', async () => {
    await upsert(other('b:1', P), instance('a:1', [{ router_id: 'router-x', count: 1, prompts: [fingerprintBytes(promptFingerprints(P))] }], { dp_size: 2 }));
    const d = decider();
    const fresh = d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
    expect(explained(fresh, 'b:1').pending_hit_tokens).to.equal(64);
    expect(explained(fresh, 'a:1').pending_hit_tokens).to.equal(0);
    const stale = d.decide({ tokenIds: P, promptTokens: 0, dryRun: true }, STALE_AFTER_MS + 1);
    expect(stale.candidates.map((c) => c.pending_hit_tokens)).to.deep.equal([0, 0]);
  });

  it("the reporter sends each decision's fingerprints with its count; --car_pending_prefix=false sends none and credits none", async () => {
    const d = decider();
    const r = d.decide({ tokenIds: P, promptTokens: 0 }, 0);
    expect(inflight.drainReport()).to.deep.equal([{ instance_name: r.prefill.name, count: 1, age_ms: 0, prompts: [fingerprintBytes(promptFingerprints(P))], prefill_tokens: [64] }]);
    const off = decider(false);
    await upsert(other('b:1', P));
    const o = off.decide({ tokenIds: P, promptTokens: 0 }, 0);
    expect(o.candidates.every((c) => c.pending_hit_tokens === undefined)).to.equal(true);
    expect(inflight.drainReport()).to.deep.equal([{ instance_name: o.prefill.name, count: 1, age_ms: 0, prefill_tokens: [64] }]);
  });
});
