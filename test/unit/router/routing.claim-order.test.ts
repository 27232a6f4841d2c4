/**
 * Claim order (routing.md "In-flight load", our extension `--car_claim_wait_ms`): a cold claim —
 * a prompt no instance holds any prefix of — waits for the view to carry it back, numbered by the
 * directory, and then follows an earlier claim of the same prefix by another replica.
 *
 * View: a:1 and b:1, DEFAULT, idle, one synchronized empty stream each (block size 4), λ = 0.8;
 * router-x, another replica, has one unrelated request in flight on b:1 (so this router knows it
 * has company, and its first choice for a cold prompt is a:1).
 */
import { EventEmitter, once } from 'node:events';
import { connect, createServer, type AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { expect } from 'chai';
import { ClaimOrder, OTHER_ROUTER_WINDOW_MS } from '../../../router-svc/inflight/claim-order.js';
import { seqBefore } from '../../../router-svc/inflight/claim-seq.js';
import { InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import type { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import { ViewProtocolError } from '../../../router-svc/viewcache/view-errors.js';
import { fingerprintBytes, MAX_PROMPT_GRANULES, promptFingerprints } from '../../../shared/keys/prompt-fingerprint.js';
import { IdentityResolver } from '../../../router-svc/identity/identity-resolver.js';
import type { WireInflightShare, WireViewInstance } from '../../../shared/view/view-wire.js';
import type { TtftCandidateExplanation } from '../../../router-svc/policy/ttft-policy.js';
import type { RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { apply, delta, snapshot, testDecider, tokens, wireInstance, wireLoad, wireStream, explained } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const ME = 'router-me';
const OTHER = 'router-x';
const FLAGS = { loadBalancePolicy: 'CAR', carPrefillLambda: 0.8, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null } as const;
const P = tokens(64); // 4 granules
const UNRELATED = tokens(64, 5000);
const fp = (prompt: readonly number[]): Buffer => fingerprintBytes(promptFingerprints(prompt));

function instance(name: string, inflight: WireInflightShare[] = []): WireViewInstance {
  return wireInstance(name, { load: { ...wireLoad(0), reported_at_ms: '10' }, inflight });
}

describe('routing.md In-flight load: claim order between replicas (--car_claim_wait_ms)', () => {
  let mono: number;
  let view: ViewCache;
  let inflight: InflightLoad;
  let updates: EventEmitter;
  let claims: ClaimOrder;
  let decider: RouteDecider;
  let metrics: RouterMetrics;
  let version: number;

  /** `router_claims_total` by outcome, as a scrape reads it. */
  async function claimCounts(): Promise<Record<string, number>> {
    const values = (await metrics.registry.getSingleMetric('router_claims_total')!.get()).values;
    return Object.fromEntries(values.map((v) => [String(v.labels['outcome']), v.value]));
  }

  beforeEach(async () => {
    mono = 1000;
    version = 1;
    view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    inflight = new InflightLoad({ routerId: ME, monotonicMs: () => mono });
    updates = new EventEmitter();
    claims = new ClaimOrder({ view, updates, inflight, waitMs: 200, monotonicMs: () => mono });
    metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 }));
    decider = testDecider(view, FLAGS, inflight, true, claims, metrics);
    const busyB = { router_id: OTHER, count: 1, prompts: [fp(UNRELATED)], prompt_seqs: [1] };
    await apply(view, snapshot('e1', 1, [instance('a:1'), instance('b:1', [busyB])], [wireStream(1, 'a:1'), wireStream(2, 'b:1')]), 0);
  });

  afterEach(() => claims.close());

  /** The directory's next view update, and the view client's event after applying it. */
  async function publish(...instances: WireViewInstance[]): Promise<void> {
    version++;
    await apply(view, delta('e1', version, { instance_upserts: instances }), 0);
    updates.emit('update');
  }

  it('a later cold claim follows an earlier claim of the same prefix once the view orders both: its own claim ends, the earlier instance counts it', async () => {
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    // Counted at once on its first choice, and sent to the directory (as the reporter would).
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    expect(inflight.drainReport()).to.have.length(1);
    expect(claims.waiting).to.equal(1);
    // The directory got router-x's claim of P on b:1 first (seq 5), this router's on a:1 next (seq 7).
    await publish(
      instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]),
      instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 5] }]),
    );
    const d = await answer;
    expect(d.prefill.name).to.equal('b:1');
    expect(d.claim_order).to.include({ claim_seq: 7, moved_from: 'a:1' });
    expect(explained(d, 'b:1').pending_hit_tokens).to.equal(64);
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
    expect(inflight.own(view.instance('b:1')!)).to.equal(1);
    // The directory hears both: the claim on a:1 withdrawn by its seq (not "answered", which would
    // end this router's oldest decision there and leave P credited on a:1), the decision on b:1 new.
    const report = inflight.drainReport()!;
    const onA = report.find((r) => r.instance_name === 'a:1')!;
    expect(onA).to.deep.include({ count: 0, withdrawn_seqs: [7] });
    expect(onA.answered).to.equal(undefined);
    // The decision on b:1 keeps the claim's place in the order: the replicas' claims after 7 see it there.
    expect(report.find((r) => r.instance_name === 'b:1')).to.deep.include({ count: 1, moved_claims: [{ prompt_index: 0, seq: 7 }] });
    expect(claims.waiting).to.equal(0);
    // An operator sees the wait and its outcome.
    expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 1, not_back: 0 });
  });

  it('claim order never crosses identities: a salted cold claim does not follow an earlier unsalted claim of the same tokens, only one of its own salt', async () => {
    const salted = new IdentityResolver(view).resolve(null, 'tenant-a');
    const fpSalted = fingerprintBytes(promptFingerprints(P, MAX_PROMPT_GRANULES, salted.fingerprintSeed));
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0, identity: salted }, 0);
    expect(claims.waiting).to.equal(1);
    // router-x claimed P first (seq 5) — unsalted: its blocks are not this request's.
    await publish(
      instance('a:1', [{ router_id: ME, count: 1, prompts: [fpSalted], prompt_seqs: [7] }]),
      instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 5] }]),
    );
    const stays = await answer;
    expect(stays.prefill.name).to.equal('a:1');
    expect(stays.claim_order).to.not.have.property('moved_from');
    // Under the same salt, the earlier claim is followed.
    const again = decider.decideOrdered({ tokenIds: tokens(64, 3000), promptTokens: 0, identity: salted }, 0);
    const Q = fingerprintBytes(promptFingerprints(tokens(64, 3000), MAX_PROMPT_GRANULES, salted.fingerprintSeed));
    const first = [...claims.waitingOn()][0]!;
    const otherName = first === 'a:1' ? 'b:1' : 'a:1';
    await publish(
      instance(first, [{ router_id: ME, count: 2, prompts: [fpSalted, Q], prompt_seqs: [7, 9] }]),
      instance(otherName, [{ router_id: OTHER, count: 1, prompts: [Q], prompt_seqs: [8] }]),
    );
    const follows = await again;
    expect(follows.prefill.name).to.equal(otherName);
    expect(follows.claim_order).to.include({ claim_seq: 9, moved_from: first });
  });

  it('the earliest claim stays where it is, whatever later claims of the same prefix the view shows', async () => {
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    await publish(
      instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [5] }]),
      instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 7] }]),
    );
    const d = await answer;
    expect(d.prefill.name).to.equal('a:1');
    expect(d.claim_order).to.deep.equal({ claim_seq: 5, held_ms: d.claim_order!.held_ms });
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    expect(await claimCounts()).to.deep.equal({ stayed: 1, moved: 0, not_back: 0 });
  });

  it('an earlier claim of another prefix does not move it (no credit there, only load)', async () => {
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    await publish(instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]));
    const d = await answer;
    expect(d.prefill.name).to.equal('a:1');
    expect(d.claim_order).to.not.have.property('moved_from');
  });

  it('an earlier claim of another prefix on the same instance moves it to an idle one (the collision one router would not have made)', async () => {
    await publish(instance('c:1'));
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    const first = [...claims.waitingOn()][0]!;
    const idle = first === 'a:1' ? 'c:1' : 'a:1';
    // router-x's claim of another new prompt reached the directory just before this one, on the same instance.
    await publish(instance(first, [
      { router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] },
      { router_id: OTHER, count: 1, prompts: [fp(tokens(64, 8000))], prompt_seqs: [5] },
    ]));
    const d = await answer;
    expect(d.prefill.name).to.equal(idle);
    expect(d.claim_order).to.include({ claim_seq: 7, moved_from: first });
    expect(explained(d, first)).to.include({ waiting_inflight_other: 1, waiting_inflight_own: 0 });
  });

  it('a claim the view does not carry back within the wait keeps its first decision (claim_seq −1)', async () => {
    const quick = new ClaimOrder({ view, updates, inflight, waitMs: 5, monotonicMs: () => mono });
    const d = await testDecider(view, FLAGS, inflight, true, quick, metrics).decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    expect(d.prefill.name).to.equal('a:1');
    expect(d.claim_order!.claim_seq).to.equal(-1);
    expect(d.claim_order!.held_ms).to.be.at.least(4);
    expect(quick.waiting).to.equal(0);
    expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 0, not_back: 1 });
  });

  it('a load report does not end an open claim (its request has not reached the engine); once it settles, the next one does', async () => {
    const answer = decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    const reported = (at: string, inflightShares: WireInflightShare[] = []): WireViewInstance => wireInstance('a:1', { load: { ...wireLoad(0), reported_at_ms: at }, inflight: inflightShares });
    await publish(reported('20'));
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    await publish(reported('30', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]));
    expect((await answer).prefill.name).to.equal('a:1');
    expect(inflight.own(view.instance('a:1')!)).to.equal(1);
    await publish(reported('40'));
    expect(inflight.own(view.instance('a:1')!)).to.equal(0);
  });

  it('a claim settled before its order came back is settled by its seq once the view carries it (the directory holds it open till then)', async () => {
    const quick = new ClaimOrder({ view, updates, inflight, waitMs: 5, monotonicMs: () => mono });
    const answer = testDecider(view, FLAGS, inflight, true, quick, metrics).decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    expect(inflight.drainReport()![0]).to.deep.include({ instance_name: 'a:1', open_claims: [0] });
    expect((await answer).claim_order!.claim_seq).to.equal(-1);
    expect(inflight.drainReport()).to.equal(null);
    await publish(instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7], open_claim_seqs: [7] }]));
    expect(inflight.drainReport()).to.deep.equal([{ instance_name: 'a:1', count: 0, age_ms: 0, settled_seqs: [7] }]);
    quick.close();
  });

  it('a claim whose wait ran out while the loop was busy takes the order that arrived meanwhile, not its first decision', async () => {
    const quick = new ClaimOrder({ view, updates, inflight, waitMs: 5, monotonicMs: () => mono });
    // The directory's update arrives as I/O (a socket here, the view stream in the router), while
    // the loop is busy past the wait, as with a burst's other requests.
    const server = createServer((socket) => socket.once('data', () => void publish(
      instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]),
      instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 5] }]),
    )));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    try {
      const answer = testDecider(view, FLAGS, inflight, true, quick, metrics).decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      client.write('x');
      const until = performance.now() + 30;
      while (performance.now() < until) {
        // busy: the wait's timer and the update's bytes are both due when the loop comes round
      }
      const d = await answer;
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: 'a:1' });
      expect(d.prefill.name).to.equal('b:1');
      expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 1, not_back: 0 });
    } finally {
      client.destroy();
      server.close();
      quick.close();
    }
  });

  it('decides at once: a warm request, a dry run, a prompt under one granule, and a router that has seen no other replica for the window', async () => {
    await publish(instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [3] }]));
    const first = await decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    expect(claims.waiting).to.equal(0);
    expect(first.claim_order!.claim_seq).to.equal(3);
    // P is in flight on a:1 now: credit there, so no wait.
    const warm = await decider.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
    expect(warm.claim_order).to.equal(undefined);
    const dry = await decider.decideOrdered({ tokenIds: tokens(64, 9000), promptTokens: 0, dryRun: true }, 0);
    expect(dry.claim_order).to.equal(undefined);
    const short = await decider.decideOrdered({ tokenIds: tokens(15, 9000), promptTokens: 0 }, 0);
    expect(short.claim_order).to.equal(undefined);
    // router-x's share goes; a minute later this router is alone.
    await publish(instance('b:1'));
    mono += OTHER_ROUTER_WINDOW_MS + 1;
    const alone = decider.decideOrdered({ tokenIds: tokens(64, 7000), promptTokens: 0 }, 0);
    expect(claims.waiting).to.equal(0);
    expect((await alone).claim_order).to.equal(undefined);
  });

  describe('TTFT orders its cold claims too', () => {
    const TTFT_FLAGS = { ...FLAGS, loadBalancePolicy: 'TTFT', ttftPrefillTokensPerS: 1000, ttftPriorSamples: 8, ttftThroughputWindow: 64, ttftHostTokenCost: 0.25, ttftWorkSlack: 0 } as const;
    const Q = tokens(64, 8000);
    /** router-x's decision for Q on `name` at directory seq `seq`, 5,000 tokens in its prefill ledger. */
    const otherLedger = (seq: number): WireInflightShare => ({ router_id: OTHER, count: 1, prompts: [fp(Q)], prompt_seqs: [seq], outstanding_prefill: { tokens: '5000', requests: 1 } });

    it('a later TTFT cold claim follows an earlier claim of the same prefix by another replica', async () => {
      const ttft = testDecider(view, TTFT_FLAGS, inflight, true, claims);
      const answer = ttft.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      expect(claims.waiting).to.equal(1);
      await publish(
        instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]),
        instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 5] }]),
      );
      const d = await answer;
      expect(d.policy).to.equal('TTFT');
      expect(d.prefill.name).to.equal('b:1');
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: 'a:1' });
      expect(explained(d, 'b:1').pending_hit_tokens).to.equal(64);
    });

    it('a later TTFT cold claim follows an earlier claim queued ahead of it where one router would have: predicted later than its idle first choice, within the work slack, with less work', async () => {
      const ttft = testDecider(view, { ...TTFT_FLAGS, ttftWorkSlack: 1 }, inflight, true, claims);
      // P and 32 tokens of its own: P is the shared part (a task's context), as router-x's request's.
      const prompt = [...P, ...tokens(32, 6000)];
      const answer = ttft.decideOrdered({ tokenIds: prompt, promptTokens: 0 }, 0);
      expect(claims.waiting).to.equal(1);
      // router-x's decisions on b:1: two unrelated ones, then its claim of P (seq 5, before this router's 7).
      await publish(
        instance('a:1', [{ router_id: ME, count: 1, prompts: [fp(prompt)], prompt_seqs: [7] }]),
        instance('b:1', [{ router_id: OTHER, count: 3, prompts: [fp(UNRELATED), fp(tokens(64, 7000)), fp(P)], prompt_seqs: [1, 3, 5] }]),
      );
      const d = await answer;
      // Behind router-x's three requests b:1 is predicted later than idle a:1, so its score is not
      // the lower; but it is within the slack with less work, and the policy picks it, as one
      // router seeing both claims in order would have.
      const [onA, onB] = [explained(d, 'a:1'), explained(d, 'b:1')] as TtftCandidateExplanation[];
      expect(onB!.predicted_ms).to.be.greaterThan(onA!.predicted_ms);
      expect(onB!.own_prefill_tokens).to.be.lessThan(onA!.own_prefill_tokens);
      expect(onB!.pending_hit_tokens).to.equal(64);
      expect(d.prefill.name).to.equal('b:1');
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: 'a:1' });
      expect(inflight.own(view.instance('a:1')!)).to.equal(0);
      expect(inflight.own(view.instance('b:1')!)).to.equal(1);
    });

    /** router-x's claim for `salt`'s prompt on an instance at `seq`, `queued` tokens in its ledger; `open` while it may still move. */
    const otherClaim = (seq: number, queued: number, salt: number, open: boolean): WireInflightShare => ({
      router_id: OTHER,
      count: 1,
      prompts: [fp(tokens(64, salt))],
      prompt_seqs: [seq],
      outstanding_prefill: { tokens: String(queued), requests: 1 },
      ...(open ? { open_claim_seqs: [seq] } : {}),
    });
    /** Whether `p` has settled by the next turn of the loop. */
    async function isSettled(p: Promise<unknown>): Promise<boolean> {
      let done = false;
      void p.then(() => (done = true));
      await new Promise((r) => setImmediate(r));
      return done;
    }

    it('a claim decides once every claim ordered before it has settled: it sees an earlier claim where it went, not where it was first routed', async () => {
      await publish(instance('c:1'), instance('d:1'));
      const ttft = testDecider(view, TTFT_FLAGS, inflight, true, claims, metrics);
      const answer = ttft.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      const first = [...claims.waitingOn()][0]!;
      // The directory hears of it as an open claim.
      expect(inflight.drainReport()!.find((r) => r.instance_name === first)).to.deep.include({ open_claims: [0] });
      const [x] = ['a:1', 'c:1', 'd:1'].filter((n) => n !== first) as [string];
      // Back as 7; router-x's claim 5, 5,000 tokens, is still open on x: this claim waits for it.
      await publish(instance(first, [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]), instance(x, [otherClaim(5, 5000, 9000, true)]));
      expect(claims.waiting).to.equal(0);
      expect(await isSettled(answer)).to.equal(false);
      // It settles by moving onto this claim's first choice: one router would have seen it there.
      await publish(instance(first, [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }, otherClaim(5, 5000, 9000, false)]), instance(x));
      const d = await answer;
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: first });
      expect(d.prefill.name).to.not.equal(first);
      expect(explained(d, first)).to.include({ ledger_requests_other: 1, ledger_tokens_other: 5000 });
      // It settles by its move: the withdrawal where it was, the decision where it went, not open.
      const report = inflight.drainReport()!;
      expect(report.find((r) => r.instance_name === first)).to.deep.include({ withdrawn_seqs: [7] });
      const where = report.find((r) => r.instance_name === d.prefill.name)!;
      expect(where).to.deep.include({ moved_claims: [{ prompt_index: 0, seq: 7 }] });
      expect(where.open_claims).to.equal(undefined);
      expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 1, not_back: 0 });
    });

    /** A TTFT claim of P through `order`, reported, and back as 7 on its first choice beside `other`. */
    async function backBeside(order: ClaimOrder, other: WireInflightShare): Promise<{ answer: Promise<RouteDecision>; first: string }> {
      const answer = testDecider(view, TTFT_FLAGS, inflight, true, order, metrics).decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      const first = [...order.waitingOn()][0]!;
      inflight.drainReport();
      await publish(instance(first, [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }, other]));
      return { answer, first };
    }

    it('an open claim ordered after it does not hold it, and a claim that stays settles where it is (settled_seqs)', async () => {
      // router-x's open claim 9 was ordered after this one (7): it waits for this one, not the reverse.
      const { answer, first } = await backBeside(claims, otherClaim(9, 5000, 9000, true));
      const d = await answer;
      expect(d.prefill.name).to.equal(first);
      expect(inflight.drainReport()).to.deep.equal([{ instance_name: first, count: 0, age_ms: 0, settled_seqs: [7] }]);
      expect(await claimCounts()).to.deep.equal({ stayed: 1, moved: 0, not_back: 0 });
    });

    it("this router's own earlier open claim holds its later claim until it settles, even when the later one's order came back first", async () => {
      const quick = new ClaimOrder({ view, updates, inflight, waitMs: 30, monotonicMs: () => mono });
      const ttft = testDecider(view, TTFT_FLAGS, inflight, true, quick, metrics);
      const P2 = tokens(64, 3000);
      const decided: string[] = [];
      const one = ttft.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0).then((d) => (decided.push('P'), d));
      mono += 1;
      const two = ttft.decideOrdered({ tokenIds: P2, promptTokens: 0 }, 0).then((d) => (decided.push('P2'), d));
      const f2 = quick.waitingOn()[1]!;
      // Only P2's order comes back (8), nothing else open anywhere: P, decided before it here, still is.
      await publish(instance(f2, [{ router_id: ME, count: 1, prompts: [fp(P2)], prompt_seqs: [8] }]));
      expect(await isSettled(two)).to.equal(false);
      // P's wait runs out: it keeps its first decision and settles, and P2 goes on.
      const [d1, d2] = await Promise.all([one, two]);
      expect(decided).to.deep.equal(['P', 'P2']);
      expect(d1.claim_order).to.include({ claim_seq: -1 });
      expect(d2.claim_order).to.include({ claim_seq: 8 });
      quick.close();
    });

    it('a claim whose earlier claims do not settle within its wait decides with what the view shows', async () => {
      const quick = new ClaimOrder({ view, updates, inflight, waitMs: 20, monotonicMs: () => mono });
      // router-x's claim 5 on the same instance never settles (its router went away).
      const { answer, first } = await backBeside(quick, otherClaim(5, 5000, 9000, true));
      const d = await answer;
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: first });
      expect(explained(d, first)).to.include({ ledger_tokens_other: 5000 });
      quick.close();
    });

    it('--car_claim_wait_fraction: a TTFT claim waits that fraction of its predicted own prefill when it is longer than --car_claim_wait_ms, at most 1000 ms', async () => {
      // 64 tokens at 100 tokens/s: 640 ms of own prefill on an idle instance.
      const slow = { ...TTFT_FLAGS, ttftPrefillTokensPerS: 100 };
      const waitFor = async (fraction: number, flags: typeof FLAGS | typeof slow): Promise<number> => {
        const order = new ClaimOrder({ view, updates, inflight, waitMs: 5, waitFraction: fraction, monotonicMs: () => mono });
        const d = await testDecider(view, flags, inflight, true, null, metrics).decideOrdered({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
        return order.waitFor(d);
      };
      expect(await waitFor(0.1, slow)).to.be.closeTo(64, 1e-6);
      expect(await waitFor(0, slow)).to.equal(5);
      expect(await waitFor(0.001, slow)).to.equal(5);
      expect(await waitFor(0.1, FLAGS)).to.equal(5); // CAR predicts no time
      expect(await waitFor(0.1, { ...slow, ttftPrefillTokensPerS: 1 })).to.equal(1000);
      // So a claim whose order comes after --car_claim_wait_ms, within the fraction, still gets it.
      const patient = new ClaimOrder({ view, updates, inflight, waitMs: 5, waitFraction: 1, monotonicMs: () => mono });
      const answer = testDecider(view, slow, inflight, true, patient, metrics).decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      const first = [...patient.waitingOn()][0]!;
      await new Promise((r) => setTimeout(r, 50));
      expect(patient.waiting).to.equal(1);
      await publish(instance(first, [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }]));
      expect((await answer).claim_order).to.include({ claim_seq: 7 });
      expect(await claimCounts()).to.deep.equal({ stayed: 1, moved: 0, not_back: 0 });
    });

    it("another replica's ledger queues ahead of a TTFT claim only with the requests ordered before it", async () => {
      await publish(instance('c:1'));
      const ttft = testDecider(view, TTFT_FLAGS, inflight, true, claims);
      // router-x's request on the same instance was ordered after this claim: it is not ahead of it.
      const later = ttft.decideOrdered({ tokenIds: P, promptTokens: 0 }, 0);
      const first = [...claims.waitingOn()][0]!;
      await publish(instance(first, [{ router_id: ME, count: 1, prompts: [fp(P)], prompt_seqs: [7] }, otherLedger(9)]));
      const stays = await later;
      expect(stays.prefill.name).to.equal(first);
      expect(stays.claim_order).to.not.have.property('moved_from');
      // Ordered before the next claim, 5,000 tokens are ahead of it there: it moves to an idle instance.
      const P2 = tokens(64, 3000);
      const earlier = ttft.decideOrdered({ tokenIds: P2, promptTokens: 0 }, 0);
      const second = [...claims.waitingOn()][0]!;
      await publish(instance(second, [{ router_id: ME, count: 1, prompts: [fp(P2)], prompt_seqs: [12] }, otherLedger(11)]));
      const moves = await earlier;
      expect(moves.claim_order).to.include({ claim_seq: 12, moved_from: second });
      expect(moves.prefill.name).to.not.equal(second);
      expect(explained(moves, second)).to.include({ ledger_requests_other: 1, ledger_tokens_other: 5000 });
    });
  });

  describe('--car_claim_prefill_tokens: long warm requests are ordered too (arrivals in bursts)', () => {
    const TTFT_FLAGS = { ...FLAGS, loadBalancePolicy: 'TTFT', ttftPrefillTokensPerS: 1000, ttftPriorSamples: 8, ttftThroughputWindow: 64, ttftHostTokenCost: 0.25, ttftWorkSlack: 0 } as const;
    // A burst's prompts share only a first block (a trace's system prompt), in flight on b:1:
    // every one of them is warm, so cold claims alone would never order them.
    const warm = (first: number): number[] => [...P.slice(0, 16), ...tokens(48, first)];

    beforeEach(async () => {
      await publish(instance('c:1'), instance('b:1', [{ router_id: OTHER, count: 2, prompts: [fp(UNRELATED), fp(P)], prompt_seqs: [1, 2] }]));
    });

    it('a warm request whose own prefill reaches it waits for its order, and an earlier claim queued on its first choice moves it', async () => {
      const burst = new ClaimOrder({ view, updates, inflight, waitMs: 200, monotonicMs: () => mono, prefillTokens: 32 });
      const ttft = testDecider(view, TTFT_FLAGS, inflight, true, burst, metrics);
      const W = warm(6000);
      const answer = ttft.decideOrdered({ tokenIds: W, promptTokens: 0 }, 0);
      expect(burst.waiting).to.equal(1);
      const first = [...burst.waitingOn()][0]!;
      const d0 = explained(await ttft.decideOrdered({ tokenIds: W, promptTokens: 0, dryRun: true }, 0), 'b:1');
      expect(d0.hit_tokens).to.equal(16);
      // router-x's request of another prompt, 5,000 tokens, reached the directory just before it, on the same instance.
      await publish(instance(first, [
        { router_id: ME, count: 1, prompts: [fp(W)], prompt_seqs: [7] },
        { router_id: OTHER, count: 1, prompts: [fp(tokens(64, 8000))], prompt_seqs: [5], outstanding_prefill: { tokens: '5000', requests: 1 } },
      ]));
      const d = await answer;
      expect(d.claim_order).to.include({ claim_seq: 7, moved_from: first });
      expect(d.prefill.name).to.not.equal(first);
      expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 1, not_back: 0 });
      burst.close();
    });

    it('a warm request whose own prefill stays below it decides at once', async () => {
      const burst = new ClaimOrder({ view, updates, inflight, waitMs: 200, monotonicMs: () => mono, prefillTokens: 100 });
      const d = await testDecider(view, TTFT_FLAGS, inflight, true, burst, metrics).decideOrdered({ tokenIds: warm(6000), promptTokens: 0 }, 0);
      expect(burst.waiting).to.equal(0);
      expect(d.claim_order).to.equal(undefined);
      expect(await claimCounts()).to.deep.equal({ stayed: 0, moved: 0, not_back: 0 });
    });
  });

  it('claim seqs compare as serial numbers across the uint32 wrap; the view rejects prompt_seqs that do not match the prompts', async () => {
    expect(seqBefore(5, 7)).to.equal(true);
    expect(seqBefore(7, 5)).to.equal(false);
    expect(seqBefore(7, 7)).to.equal(false);
    expect(seqBefore(0xfffffffe, 1)).to.equal(true);
    expect(seqBefore(1, 0xfffffffe)).to.equal(false);
    const bad = instance('a:1', [{ router_id: OTHER, count: 2, prompts: [fp(P), fp(UNRELATED)], prompt_seqs: [4] }]);
    let error: unknown = null;
    try {
      await apply(view, delta('e1', 2, { instance_upserts: [bad] }), 0);
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(ViewProtocolError);
    expect((error as Error).message).to.equal('view_protocol: instance a:1: 1 prompt_seqs of router "router-x" for 2 pending prompts');
    // More open claims than decisions, or a seq that is no uint32, is no share either.
    for (const open_claim_seqs of [[4, 5], [-1]]) {
      const badOpen = instance('a:1', [{ router_id: OTHER, count: 1, prompts: [fp(P)], prompt_seqs: [4], open_claim_seqs }]);
      error = null;
      try {
        await apply(view, delta('e1', 2, { instance_upserts: [badOpen] }), 0);
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(ViewProtocolError);
      expect((error as Error).message).to.match(/^view_protocol: instance a:1: open_claim_seqs of router "router-x": expected at most count \(1\) uint32s, got /);
    }
  });
});
