/**
 * routing.md "In-flight load" on the router: CAR's `waiting` = reported waiting + this router's
 * decisions no load report reflects yet + the other routers' from the view; the formula is
 * unchanged and the route explanation shows the parts. Time is a hand-moved monotonic clock.
 *
 * View: a:1 and b:1, DEFAULT, no streams (prompt_tokens only: every kv_hit_ratio is 0), so with
 * λ = 0.5 score = .5 + .5 · queue_cost and the smaller waiting wins.
 */
import { expect } from 'chai';
import { InflightLoad, INFLIGHT_TTL_MS } from '../../../router-svc/inflight/inflight-load.js';
import type { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { parseRouteRequest } from '../../../router-svc/http/route-request.js';
import { RouterHttpServer } from '../../../router-svc/http/router-http-server.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import type { RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { NO_LAST_END, type WireInflightShare, type WireViewInstance } from '../../../shared/view/view-wire.js';
import { fingerprintBytes, type Footprint } from '../../../shared/keys/prompt-fingerprint.js';
import { apply, delta, snapshot, testDecider, wireInstance, wireLoad, explained } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const ME = 'router-me';
const FLAGS = { loadBalancePolicy: 'CAR', carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null } as const;

type ShareInput = Omit<WireInflightShare, 'prompts'> & { prompts?: Buffer[] };

function withReport(name: string, waiting: number, reportedAtMs: number, shares: ShareInput[] = []): WireViewInstance {
  const inflight: WireInflightShare[] = shares.map((s) => ({ ...s, prompts: s.prompts ?? [] }));
  return wireInstance(name, { load: { ...wireLoad(waiting), reported_at_ms: String(reportedAtMs) }, inflight });
}

describe('routing.md In-flight load (router)', () => {
  let mono: number;
  let view: ViewCache;
  let inflight: InflightLoad;
  let decider: RouteDecider;
  let version: number;

  beforeEach(async () => {
    mono = 1000;
    version = 1;
    view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    inflight = new InflightLoad({ routerId: ME, monotonicMs: () => mono });
    decider = testDecider(view, FLAGS, inflight);
    await apply(view, snapshot('e1', 1, [withReport('a:1', 0, 10), withReport('b:1', 1, 10)], []), 0);
  });

  async function upsert(...instances: WireViewInstance[]): Promise<void> {
    version++;
    await apply(view, delta('e1', version, { instance_upserts: instances }), 0);
  }

  const route = (dryRun = false): RouteDecision => decider.decide({ tokenIds: null, promptTokens: 64, dryRun }, 0);

  it('own decisions count at once: a (0 waiting) takes the first; a = 0+1 ties b = 1 (a again, rotation starts there); a = 0+2 > b = 1 → b', () => {
    const first = route();
    expect(first.prefill.name).to.equal('a:1');
    expect(explained(first, 'a:1')).to.include({ waiting_reported: 0, waiting_inflight_own: 0, waiting_inflight_other: 0, queue_cost: 0 });
    const second = route();
    expect(explained(second, 'a:1')).to.include({ waiting_reported: 0, waiting_inflight_own: 1, waiting_inflight_other: 0, queue_cost: 1 });
    expect(explained(second, 'b:1')).to.include({ waiting_reported: 1, waiting_inflight_own: 0, queue_cost: 1 });
    const third = route();
    expect([first, second, third].map((d) => d.prefill.name)).to.deep.equal(['a:1', 'a:1', 'b:1']);
    expect(inflight.own(view.instance('a:1')!)).to.equal(2);
    expect(inflight.own(view.instance('b:1')!)).to.equal(1);
  });

  it("other replicas' decisions come through the view: a carries 3 of router-x → waiting 3, b (1) wins", async () => {
    await upsert(withReport('a:1', 0, 10, [{ router_id: 'router-x', count: 3 }]));
    const d = route();
    expect(d.prefill.name).to.equal('b:1');
    expect(explained(d, 'a:1')).to.include({ waiting_reported: 0, waiting_inflight_own: 0, waiting_inflight_other: 3, queue_cost: 1 });
    expect(explained(d, 'b:1').queue_cost).to.be.closeTo(1 / 3, 1e-12);
  });

  it("no double counting: the router's own share coming back through the view is skipped (the local count is kept)", async () => {
    route(); // → a
    await upsert(withReport('a:1', 0, 10, [{ router_id: ME, count: 1 }, { router_id: 'router-x', count: 2 }]));
    const d = route();
    expect(explained(d, 'a:1')).to.include({ waiting_inflight_own: 1, waiting_inflight_other: 2 });
  });

  it(`expiry: an own decision ends ${INFLIGHT_TTL_MS} ms after it on the monotonic clock`, () => {
    route(); // → a
    const a = view.instance('a:1')!;
    mono += INFLIGHT_TTL_MS - 1;
    expect(inflight.own(a)).to.equal(1);
    mono += 1;
    expect(inflight.own(a)).to.equal(0);
  });

  it('a newer load report ends the entries made before it; an upsert with the same report (in-flight shares only) does not', async () => {
    route(); // → a, saw reported_at 10
    await upsert(withReport('a:1', 0, 10, [{ router_id: 'router-x', count: 1 }]));
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    await upsert(withReport('a:1', 1, 11));
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
    // A decision after that report lives until the next one.
    const d = route();
    expect(inflight.own(view.instance(d.prefill.name)!)).to.equal(1);
  });

  it('directory loss: a stale view drops the other routers\' shares (no one expires them) but keeps own counts and routes on', async () => {
    await upsert(withReport('b:1', 0, 10, [{ router_id: 'router-x', count: 5 }]));
    const staleAt = STALE_AFTER_MS + 1;
    const d1 = decider.decide({ tokenIds: null, promptTokens: 64 }, staleAt);
    expect(explained(d1, 'b:1').waiting_inflight_other).to.equal(0);
    const d2 = decider.decide({ tokenIds: null, promptTokens: 64 }, staleAt);
    expect(explained(d2, d1.prefill.name).waiting_inflight_own).to.equal(1);
    expect(d2.prefill.name).to.not.equal(d1.prefill.name);
  });

  it('a proxied request the engine answered leaves the own count at once; answered before it was reported, it is never sent', async () => {
    const first = await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    const second = await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    expect([first.decision.prefill.name, second.decision.prefill.name]).to.deep.equal(['a:1', 'a:1']);
    const a = view.instance('a:1')!;
    expect(inflight.own(a)).to.equal(2);
    second.answered();
    second.answered(); // idempotent
    expect(inflight.own(a)).to.equal(1);
    first.answered();
    expect(inflight.own(a)).to.equal(0);
    // Both ended before the reporter's next batch: the other routers need not hear of them.
    expect(inflight.drainReport()).to.equal(null);
  });

  it('an answer to a reported decision is reported too, so the other replicas end it as this router does', async () => {
    const first = await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    // Proxied: their prefill is in the ledger (the gauge), so their in-flight entries carry 0 tokens.
    // The gauge names its head (the oldest, sent 0 ms ago) and no first token seen yet.
    expect(inflight.drainReport()).to.deep.equal([
      { instance_name: 'a:1', count: 2, age_ms: 0, outstanding_prefill: { tokens: '128', requests: 2, head_tokens: '64', head_age_ms: 0, last_end_age_ms: NO_LAST_END }, prefill_tokens: [0, 0] },
    ]);
    first.answered();
    first.answered(); // idempotent
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    expect(inflight.drainReport()).to.deep.equal([
      { instance_name: 'a:1', count: 0, age_ms: 0, outstanding_prefill: { tokens: '64', requests: 1, head_tokens: '64', head_age_ms: 0, last_end_age_ms: 0 }, answered: 1 },
    ]);
    expect(inflight.drainReport()).to.equal(null);
  });

  it('an answer after a newer load report ended the decision is not reported (the directory ended it already); its prefill ledger entry\'s end is', async () => {
    const first = await decider.decideTracked({ tokenIds: null, promptTokens: 64 }, 0);
    expect(inflight.drainReport()).to.have.length(1);
    await upsert(withReport('a:1', 1, 20), withReport('b:1', 1, 20));
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
    // A load report does not end a ledger entry: only the first token or the answer does.
    expect(inflight.ownOutstandingRequests(view.instance('a:1')!)).to.equal(1);
    first.answered();
    // The emptied gauge still says when its last first token came (just now).
    expect(inflight.drainReport()).to.deep.equal([{ instance_name: 'a:1', count: 0, age_ms: 0, outstanding_prefill: { tokens: '0', requests: 0, last_end_age_ms: 0 } }]);
    expect(inflight.drainReport()).to.equal(null);
  });

  it("claim order: a claim's re-decision counts only the ledger entries sent before it — its own entry is not queued ahead of itself", () => {
    const a = view.instance('a:1')!;
    const p = (n: number): Uint32Array => Uint32Array.of(n, n + 1);
    inflight.startPrefill(a, 500, p(1));
    mono = 1010;
    inflight.startPrefill(a, 300, p(7));
    expect([inflight.ownOutstandingRequests(a), inflight.ownOutstandingTokens(a)]).to.deep.equal([2, 800]);
    expect(inflight.ledgerPendingGranules(a, p(7), 0)).to.equal(2);
    const bounded = inflight.orderedBefore(0, 1010, () => [inflight.ownOutstandingRequests(a), inflight.ownOutstandingTokens(a), inflight.ledgerPendingGranules(a, p(7), 0)]);
    expect(bounded).to.deep.equal([1, 500, 0]);
  });

  it("claim order: another replica's ledger requests ordered after a claim are taken out at their own tokens (prompt_tokens), at the mean only without them", async () => {
    const long = fingerprintBytes(Uint32Array.of(1, 2, 3));
    const short = fingerprintBytes(Uint32Array.of(4, 5));
    const ledger = (perPrompt?: number[]): ShareInput => ({
      router_id: 'router-x',
      count: 2,
      prompts: [long, short],
      prompt_seqs: [4, 9],
      outstanding_prefill: { tokens: '38400', requests: 2, prompts: [long, short], ...(perPrompt === undefined ? {} : { prompt_tokens: perPrompt }) },
    });
    const ordered = (seq: number): number => inflight.orderedBefore(seq, mono, () => inflight.otherOutstandingTokens(view.instance('a:1')!, false));
    await upsert(withReport('a:1', 0, 10, [ledger([38000, 400])]));
    // The 38,000-token prompt (seq 4) is ahead of a claim numbered 6, the 400-token one (seq 9) is not.
    expect(ordered(6)).to.equal(38000);
    expect([ordered(3), ordered(10), inflight.otherOutstandingTokens(view.instance('a:1')!, false)]).to.deep.equal([0, 38400, 38400]);
    // An older router's gauge: only the total, so each request ordered after the claim at the mean.
    await upsert(withReport('a:1', 0, 10, [ledger()]));
    expect(ordered(6)).to.equal(19200);
  });

  it('ledger footprint (TTFT on a full pool): what the prompts ahead hold beyond a prompt; after a pending prefix, only what was sent after its producer', () => {
    const a = view.instance('a:1')!;
    // Fingerprints: context C = granules 1,2 and context D = granules 9,10 (chained values stand in).
    const mine = Uint32Array.of(1, 2, 3);
    inflight.startPrefill(a, 100, Uint32Array.of(9, 10, 11)); // D, before the producer
    inflight.startPrefill(a, 100, Uint32Array.of(1, 2, 5)); // the producer of C
    inflight.startPrefill(a, 100, Uint32Array.of(9, 10, 12)); // D again, after it
    const footprint = (producerGranules: number): Footprint => inflight.ledgerFootprint(a, mine, false, producerGranules, { all: 0, included: 0 });
    // All of it: D's 3 + the producer's own tail 1 + D's second tail 1.
    expect(footprint(2).all).to.equal(5);
    // After the producer of 2 granules of C only the later D counts — whole, as nothing before it is counted.
    expect(footprint(2).included).to.equal(3);
    // No entry shares 3 granules: the producer is in another ledger, whose order against this one is unknown: none counts.
    expect(footprint(3)).to.deep.equal({ all: 5, included: 0 });
  });

  it("ledger footprint between replicas: another replica's entries the directory ordered after the producer count; those ordered before it, or no longer carried with a seq, do not", async () => {
    const f = (...g: number[]): Buffer => fingerprintBytes(Uint32Array.of(...g));
    const mine = Uint32Array.of(1, 2, 3);
    // This router's producer of context C (granules 1,2), numbered 5 by the directory.
    inflight.startPrefill(view.instance('a:1')!, 100, Uint32Array.of(1, 2, 5));
    // router-x's ledger: D before the producer (seq 4), D after it (seq 6), E (its decision no longer carried).
    const ledger = [f(9, 10, 11), f(9, 10, 12), f(20, 21, 22)];
    await upsert(
      withReport('a:1', 0, 10, [
        { router_id: ME, count: 1, prompts: [f(1, 2, 5)], prompt_seqs: [5] },
        { router_id: 'router-x', count: 2, prompts: [f(9, 10, 11), f(9, 10, 12)], prompt_seqs: [4, 6], outstanding_prefill: { tokens: '300', requests: 3, prompts: ledger } },
      ]),
    );
    const footprint = (producerGranules: number, stale = false): Footprint => inflight.ledgerFootprint(view.instance('a:1')!, mine, stale, producerGranules, { all: 0, included: 0 });
    // All of it: the producer's tail 1, D 3, D's second tail 1, E 3.
    expect(footprint(2).all).to.equal(8);
    // After C's producer only the D numbered 6: whole, as nothing before it is counted.
    expect(footprint(2).included).to.equal(3);
    // Once the directory numbers router-x's E after the producer too, it counts as well.
    await upsert(
      withReport('a:1', 0, 10, [
        { router_id: ME, count: 1, prompts: [f(1, 2, 5)], prompt_seqs: [5] },
        { router_id: 'router-x', count: 3, prompts: [f(9, 10, 11), f(9, 10, 12), f(20, 21, 22)], prompt_seqs: [4, 6, 7], outstanding_prefill: { tokens: '300', requests: 3, prompts: ledger } },
      ]),
    );
    expect(footprint(2).included).to.equal(6);
    // A stale view carries no other replica's order: only this router's ledger (nothing after its producer).
    expect(footprint(2, true)).to.deep.equal({ all: 1, included: 0 });
  });

  it('"dry_run": true explains without counting', () => {
    route(true);
    route(true);
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
    expect(inflight.drainReport()).to.equal(null);
  });

  it('the reporter outbox: decisions per instance since the last drain, dated by the age of the newest', () => {
    route(); // a at 1000
    mono += 5;
    route(); // a (tie with b, rotation) or b
    mono += 3;
    const report = inflight.drainReport()!;
    const total = report.reduce((n, d) => n + d.count, 0);
    expect(total).to.equal(2);
    const a = report.find((d) => d.instance_name === 'a:1')!;
    expect(a.age_ms).to.be.oneOf([3, 8]);
    expect(inflight.drainReport()).to.equal(null);
  });

  it('--car_inflight_load=false: reported waiting only, in-flight parts 0', () => {
    const off = testDecider(view, FLAGS);
    for (let i = 0; i < 3; i++) {
      const d = off.decide({ tokenIds: null, promptTokens: 64 }, 0);
      expect(d.prefill.name).to.equal('a:1');
      expect(explained(d, 'a:1')).to.include({ waiting_reported: 0, waiting_inflight_own: 0, waiting_inflight_other: 0 });
    }
  });

  it('dry_run must be a boolean (400 naming the field)', () => {
    expect(parseRouteRequest({ prompt_tokens: 3, dry_run: true }).dryRun).to.equal(true);
    expect(parseRouteRequest({ prompt_tokens: 3 }).dryRun).to.equal(false);
    expect(() => parseRouteRequest({ prompt_tokens: 3, dry_run: 'yes' })).to.throw('dry_run must be a boolean');
  });

  it('POST /v1/route: dry_run holds for text prompts and messages too (no tokenizer: routed by load, still not counted)', async () => {
    const metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 }));
    const server = await RouterHttpServer.start({ port: 0, host: '127.0.0.1', view, decider, proxy: null, metrics, internalApiToken: '', clock: () => 0 });
    const post = async (body: object): Promise<{ status: number; json: Record<string, unknown> }> => {
      const res = await fetch(`http://127.0.0.1:${server.port}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    try {
      const messages = [{ role: 'user', content: 'hello' }];
      expect((await post({ messages, dry_run: true })).status).to.equal(200);
      expect((await post({ prompt: 'hello', dry_run: true })).status).to.equal(200);
      expect((await post({ token_ids: [1, 2, 3], dry_run: true })).status).to.equal(200);
      expect(inflight.drainReport()).to.equal(null);
      const bad = await post({ messages, dry_run: 'yes' });
      expect(bad.status).to.equal(400);
      expect(JSON.stringify(bad.json)).to.include('dry_run must be a boolean');
      expect((await post({ messages })).status).to.equal(200);
      expect(inflight.drainReport()).to.deep.equal([{ instance_name: 'a:1', count: 1, age_ms: 0, prefill_tokens: [2] }]);
    } finally {
      await server.close();
    }
  });
});
