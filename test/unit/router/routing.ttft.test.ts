/**
 * The TTFT policy over a real view cache (docs/concepts.md "Routing by predicted time to first token"; issue 27). Throughput
 * prior 1,000 tokens/s (1 token per ms, so predicted ms = tokens), Host reload cost c = 0.25.
 * Token ids 1..16 with block size 4 are 4 blocks k0..k3. Load reports are stamped at 10 ms and
 * decisions made at 0 ms unless a test says otherwise (so no backlog is worked off).
 */
import { expect } from 'chai';
import { InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import { createPolicy, type PolicyFlags } from '../../../router-svc/policy/create-policy.js';
import type { RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { TtftPolicy, type TtftCandidateExplanation } from '../../../router-svc/policy/ttft-policy.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { NO_LAST_END, type WireInflightShare, type WireViewInstance, type WireViewStream } from '../../../shared/view/view-wire.js';
import { decodeViewUpdate } from '../../../router-svc/viewcache/view-update.js';
import { firstTokenVisible } from '../../../router-svc/proxy/first-token.js';
import { fingerprintBytes, promptFingerprints } from '../../../shared/keys/prompt-fingerprint.js';
import { DEVICE, HOST, apply, blockKeys, delta, residency, residencyChanges, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;
const ME = 'router-me';
const TTFT: PolicyFlags = {
  loadBalancePolicy: 'TTFT',
  carPrefillLambda: 0.5,
  carHostHitWeight: 0.5,
  targetTtftMs: null,
  targetTpotMs: null,
  ttftPrefillTokensPerS: 1000,
  ttftPriorSamples: 8,
  ttftThroughputWindow: 64,
  ttftHostTokenCost: 0.25,
  ttftWorkSlack: 0,
  ttftSlackGrowth: 0,
  ttftTieTolerance: 0,
};
const T16 = tokens(16);

function instance(name: string, waiting = 0, inflight: WireInflightShare[] = [], over: Partial<WireViewInstance> = {}): WireViewInstance {
  return wireInstance(name, { load: { ...wireLoad(waiting), reported_at_ms: '10' }, inflight, ...over });
}

function ttftOf(d: RouteDecision, name: string): TtftCandidateExplanation {
  const c = d.candidates.find((x) => x.instance_name === name && x.role === 'prefill');
  if (c === undefined) throw new Error(`no candidate ${name} in ${JSON.stringify(d.candidates)}`);
  return c as TtftCandidateExplanation;
}

/** A share of another router's decisions, with or without their prefill tokens. */
function share(count: number, prefillTokens: number | null): WireInflightShare {
  const s: WireInflightShare = { router_id: 'router-x', count, prompts: [] };
  if (prefillTokens !== null) {
    s.prefill_tokens = String(prefillTokens);
    s.prefill_token_decisions = count;
  }
  return s;
}

describe('TTFT policy (routing by predicted time to first token)', () => {
  let view: ViewCache;
  let mono: number;
  let inflight: InflightLoad;
  let k: Uint8Array[];
  let version: number;

  before(async () => {
    k = await blockKeys(T16);
  });

  beforeEach(() => {
    view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
    mono = 1000;
    version = 1;
    inflight = new InflightLoad({ routerId: ME, monotonicMs: () => mono });
  });

  async function load(instances: WireViewInstance[], streams: WireViewStream[] = instances.map((inst, i) => wireStream(i + 1, inst.name))): Promise<void> {
    await apply(view, snapshot('e1', 1, instances, streams), 0);
  }

  async function upsert(...instances: WireViewInstance[]): Promise<void> {
    version++;
    await apply(view, delta('e1', version, { instance_upserts: instances }), 0);
  }

  function policy(flags: Partial<PolicyFlags> = {}): TtftPolicy {
    return createPolicy({ ...TTFT, ...flags }, inflight, ME) as TtftPolicy;
  }

  /** Wall time `t` (the decision's nowMs), the monotonic clock moved with it. */
  function at(t: number): number {
    mono = 1000 + t;
    return t;
  }

  function decider(p: TtftPolicy, pendingPrefix = true): RouteDecider {
    const metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 }));
    return new RouteDecider(p, view, metrics, 'TTFT', inflight, pendingPrefix, null, p);
  }

  it('TT3 queued tokens, not requests: one long prompt in flight on a outweighs three short ones on b (CAR, by count, picks a)', async () => {
    await load([instance('a:1', 0, [share(1, 3000)]), instance('b:1', 0, [share(3, 300)])]);
    const d = policy().decide({ tokenIds: tokens(64), promptTokens: 0 }, view, 0);
    expect(d.policy).to.equal('TTFT');
    expect(d.prefill.name).to.equal('b:1');
    expect(ttftOf(d, 'a:1')).to.include({ queued_tokens: 3000, own_prefill_tokens: 64, queue_ms: 3000, own_prefill_ms: 64, predicted_ms: 3064, score: 3064 });
    expect(ttftOf(d, 'b:1')).to.include({ queued_tokens: 300, predicted_ms: 364, waiting_inflight_other: 3, inflight_tokens_other: 300, queue_cost: 0.1 });
    const car = createPolicy({ ...TTFT, loadBalancePolicy: 'CAR' }, inflight, ME).decide({ tokenIds: tokens(64), promptTokens: 0 }, view, 0);
    expect(car.prefill.name).to.equal('a:1');
  });

  it("TT4 another replica's decisions without prefill tokens (an older router) count at the per-waiting worth; its own share coming back is skipped", async () => {
    await load([instance('a:1', 0, [share(2, null), { router_id: ME, count: 5, prompts: [], prefill_tokens: '9999', prefill_token_decisions: 5 }]), instance('b:1')]);
    const d = policy().decide({ tokenIds: tokens(40), promptTokens: 0 }, view, 0);
    // Before any decision a waiting request is worth this one's own prefill: 40 tokens.
    expect(ttftOf(d, 'a:1')).to.include({ tokens_per_waiting: 40, inflight_tokens_other: 80, waiting_inflight_other: 2, queued_tokens: 80 });
    expect(d.prefill.name).to.equal('b:1');
  });

  it("TT3 this router's decisions count with their prefill tokens until a newer load report ends them", async () => {
    await load([instance('a:1'), instance('b:1')]);
    const p = policy();
    const dec = decider(p);
    // A long one lands on either idle engine (an exact tie); short ones then avoid it.
    const long = dec.decide({ tokenIds: tokens(2000), promptTokens: 0 }, 0);
    const busy = long.prefill.name;
    const idle = busy === 'a:1' ? 'b:1' : 'a:1';
    const short = dec.decide({ tokenIds: tokens(100, 50_000), promptTokens: 0, dryRun: true }, 0);
    expect(short.prefill.name).to.equal(idle);
    expect(ttftOf(short, busy)).to.include({ waiting_inflight_own: 1, inflight_tokens_own: 2000, queued_tokens: 2000 });
    // The engine's next report reflects it: the own entry ends, the report's waiting request counts
    // at the mean of what was routed there (2,000), and is worked off as time passes.
    await upsert(instance(busy, 1, [], { load: { ...wireLoad(1), reported_at_ms: '20' } }), instance(idle, 0, [], { load: { ...wireLoad(0), reported_at_ms: '20' } }));
    const later = dec.decide({ tokenIds: tokens(100, 50_000), promptTokens: 0, dryRun: true }, 520);
    expect(ttftOf(later, busy)).to.include({ waiting_inflight_own: 0, inflight_tokens_own: 0, waiting_reported: 1, tokens_per_waiting: 2000, since_report_ms: 500, queued_tokens: 1500 });
    // A report older than the in-flight TTL (2 s) is worked off at most that long.
    expect(ttftOf(dec.decide({ tokenIds: tokens(100, 50_000), promptTokens: 0, dryRun: true }, 60_000), busy).since_report_ms).to.equal(2000);
  });

  it('TT12 the prefill ledger: a proxied request counts with its tokens until its first token, across load reports, and explains the reported waiting it was part of', async () => {
    await load([instance('a:1'), instance('b:1')]);
    const dec = decider(policy());
    const long = await dec.decideTracked({ tokenIds: tokens(3000), promptTokens: 0 }, at(0));
    const busy = long.decision.prefill.name;
    const probe = (nowMs = 0): TtftCandidateExplanation => ttftOf(dec.decide({ tokenIds: tokens(10, 90_000), promptTokens: 0, dryRun: true }, at(nowMs)), busy);
    expect(probe()).to.include({ ledger_requests_own: 1, ledger_tokens_own: 3000, waiting_inflight_own: 1, inflight_tokens_own: 0, worked_off_tokens: 0, queued_tokens: 3000 });
    // The engine reports it waiting: the in-flight entry ends, the ledger keeps it, and the report's
    // one waiting request is the ledger's (nothing unknown, nothing counted twice). The engine has
    // been prefilling it for 520 ms at 1 token/ms: 520 of its tokens are done.
    const other = busy === 'a:1' ? 'b:1' : 'a:1';
    await upsert(instance(busy, 1, [], { load: { ...wireLoad(1), reported_at_ms: '20' } }), instance(other, 0, [], { load: { ...wireLoad(0), reported_at_ms: '20' } }));
    expect(probe(520)).to.include({ waiting_inflight_own: 0, waiting_reported: 1, waiting_unknown: 0, ledger_tokens_own: 3000, worked_off_tokens: 520, queued_tokens: 2480 });
    // Its prefix still counts as computed ahead of a request that extends it (pending credit from the ledger).
    const next = ttftOf(dec.decide({ tokenIds: [...tokens(3000), ...tokens(40, 70_000)], promptTokens: 0, dryRun: true }, 520), busy);
    // 187 whole 16-token granules of the 3,000: 2,992 tokens credited, 48 left to compute.
    expect(next).to.include({ pending_hit_tokens: 2992, own_prefill_tokens: 48 });
    long.firstToken();
    // The report still says 1 waiting: the request just answered, which the ledger held when the
    // report was made — no phantom backlog. A newer report of 1 waiting is one no ledger explains.
    expect(probe(520)).to.include({ ledger_requests_own: 0, ledger_tokens_own: 0, waiting_reported: 1, waiting_unknown: 0, queued_tokens: 0 });
    await upsert(instance(busy, 1, [], { load: { ...wireLoad(1), reported_at_ms: '600' } }), instance(other, 0, [], { load: { ...wireLoad(0), reported_at_ms: '600' } }));
    expect(probe(600)).to.include({ waiting_reported: 1, waiting_unknown: 1, tokens_per_waiting: 3000, queued_tokens: 3000 });
  });

  it('TT14 the engine works on the head of its queue: a nearly finished long prompt weighs what is left of it, counted from the later of its send and the last first token', async () => {
    await load([instance('a:1'), instance('b:1')]);
    const dec = decider(policy());
    const long = await dec.decideTracked({ tokenIds: tokens(4000), promptTokens: 0 }, at(0));
    const x = long.decision.prefill.name;
    const y = x === 'a:1' ? 'b:1' : 'a:1';
    // At 3,000 ms 1,000 of the long prompt are left: a 2,000-token one goes to the idle engine.
    const medium = await dec.decideTracked({ tokenIds: tokens(2000, 10_000), promptTokens: 0 }, at(3000));
    expect(medium.decision.prefill.name).to.equal(y);
    // At 3,200 ms: x has 800 left, y 1,800 — a short request goes behind the long one, which
    // counted at its full size (4,000) would have sent it to y.
    const short = dec.decide({ tokenIds: tokens(10, 90_000), promptTokens: 0, dryRun: true }, at(3200));
    expect(short.prefill.name).to.equal(x);
    expect(ttftOf(short, x)).to.include({ ledger_tokens_own: 4000, worked_off_tokens: 3200, queued_tokens: 800 });
    expect(ttftOf(short, y)).to.include({ ledger_tokens_own: 2000, worked_off_tokens: 200, queued_tokens: 1800 });
    // A 1,000-token request queues on x behind the long one (750 + 1,000 against 1,750 + 1,000).
    const queued = await dec.decideTracked({ tokenIds: tokens(1000, 20_000), promptTokens: 0 }, at(3250));
    expect(queued.decision.prefill.name).to.equal(x);
    // The long one's answer comes at 3,300 ms: x works on the queued one from then, not from its send.
    at(3300);
    long.answered();
    const after = ttftOf(dec.decide({ tokenIds: tokens(10, 90_000), promptTokens: 0, dryRun: true }, at(3400)), x);
    expect(after).to.include({ ledger_requests_own: 1, ledger_tokens_own: 1000, worked_off_tokens: 100, queued_tokens: 900 });
    // Never more than the head itself: at 9,000 ms the queued request is overdue, counted as done.
    expect(ttftOf(dec.decide({ tokenIds: tokens(10, 90_000), promptTokens: 0, dryRun: true }, at(9000)), x)).to.include({ worked_off_tokens: 1000, queued_tokens: 0 });
  });

  it("TT12 other replicas' ledgers come through the view (outstanding_prefill); the report's waiting beyond all ledgers is unknown", async () => {
    const ledger = (requests: number, tokens: number): WireInflightShare => ({ router_id: 'router-x', count: 0, prompts: [], outstanding_prefill: { tokens: String(tokens), requests } });
    await load([instance('a:1', 3, [ledger(2, 5000)]), instance('b:1', 1, [ledger(1, 100)])]);
    const d = policy().decide({ tokenIds: tokens(50), promptTokens: 0 }, view, 0);
    // a: 5,000 known + (3 − 2) × 50 unknown; b: 100 known + 0 unknown.
    expect(ttftOf(d, 'a:1')).to.include({ ledger_requests_other: 2, ledger_tokens_other: 5000, waiting_unknown: 1, queued_tokens: 5050 });
    expect(ttftOf(d, 'b:1')).to.include({ ledger_requests_other: 1, waiting_unknown: 0, queued_tokens: 100 });
    expect(d.prefill.name).to.equal('b:1');
  });


  it("TT12 a request retried on the next-best engine (the first vanished) moves to its ledger with that engine's own prefill; its first token ends it there and teaches no engine", async () => {
    // a: nothing cached, idle → 16 ms. b: k0 k1 on Device (own 8) behind another replica's 1,000-token ledger → 1,008 ms.
    const ledger: WireInflightShare = { router_id: 'router-x', count: 0, prompts: [], outstanding_prefill: { tokens: '1000', requests: 1 } };
    await load([instance('a:1'), instance('b:1', 0, [ledger])], [wireStream(1, 'a:1'), wireStream(2, 'b:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE]))]);
    const p = policy();
    const dec = decider(p);
    const tracked = await dec.decideTracked({ tokenIds: T16, promptTokens: 0 }, 0);
    expect(tracked.decision.prefill.name).to.equal('a:1');
    expect(inflight.ownOutstandingTokens(view.instance('a:1')!)).to.equal(16);
    tracked.answered(); // the forward to a:1 failed before any byte
    const moved = dec.retarget(tracked, 'b:1');
    expect(inflight.ownOutstandingTokens(view.instance('a:1')!)).to.equal(0);
    expect(inflight.ownOutstandingRequests(view.instance('b:1')!)).to.equal(1);
    expect(inflight.ownOutstandingTokens(view.instance('b:1')!)).to.equal(8);
    expect(inflight.own(view.instance('b:1')!)).to.equal(1);
    moved.firstToken();
    expect(inflight.ownOutstandingRequests(view.instance('b:1')!)).to.equal(0);
    // The time included the failed attempt and the prediction was a's: neither engine learns from it.
    expect(p.throughputEstimates().every((e) => e.samples === 0)).to.equal(true);
    moved.answered();
    expect(inflight.own(view.instance('b:1')!)).to.equal(0);
  });
  it('TT5 hits: Device free, Host-only at c; c = 1 makes a Host hit worth nothing', async () => {
    // a: k0 k1 Device → own 16 − 8 = 8. b: k0 Device, k1..k3 Host → own 16 − 4 − 12 + .25 · 12 = 3.
    await load(
      [instance('a:1'), instance('b:1')],
      [wireStream(1, 'a:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE])), wireStream(2, 'b:1', residency([k[0]!, k[1]!, k[2]!, k[3]!], [DEVICE, HOST, HOST, HOST]))],
    );
    const d = policy().decide({ tokenIds: T16, promptTokens: 0 }, view, 0);
    expect(d.prefill.name).to.equal('b:1');
    expect(ttftOf(d, 'a:1')).to.include({ own_prefill_tokens: 8, device_hit_tokens: 8, host_only_hit_tokens: 0, hit_tokens: 8, kv_hit_ratio: 0.5 });
    expect(ttftOf(d, 'b:1')).to.include({ own_prefill_tokens: 3, device_hit_tokens: 4, host_only_hit_tokens: 12, kv_hit_ratio: 13 / 16 });
    const reload = policy({ ttftHostTokenCost: 1 }).decide({ tokenIds: T16, promptTokens: 0 }, view, 0);
    expect(reload.prefill.name).to.equal('a:1');
    expect(ttftOf(reload, 'b:1').own_prefill_tokens).to.equal(12);
  });

  it('TT5 DP minimum: a 2-rank instance costs what its worst rank costs; a stale view gives no credit, with the reason', async () => {
    await load(
      [instance('m:1', 0, [], { dp_size: 2 }), instance('n:1')],
      [
        wireStream(1, 'm:1', { ...residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, DEVICE]), dp_rank: 0 }),
        wireStream(2, 'm:1', { ...residency([k[0]!], [DEVICE]), dp_rank: 1 }),
        wireStream(3, 'n:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE])),
      ],
    );
    const d = policy().decide({ tokenIds: T16, promptTokens: 0 }, view, 0);
    expect(ttftOf(d, 'm:1').own_prefill_tokens).to.equal(12);
    expect(d.prefill.name).to.equal('n:1');
    const stale = policy().decide({ tokenIds: T16, promptTokens: 0 }, view, STALE_AFTER_MS + 1);
    expect(ttftOf(stale, 'n:1')).to.include({ own_prefill_tokens: 16, hit_tokens: 0, note: 'directory view stale: no cache credit' });
  });

  it('TT6 a repeat of a prompt in flight: its prefix is credited where it is queued, and at an equal wait the less work wins', async () => {
    await load([instance('a:1'), instance('b:1')]);
    const dec = decider(policy(), true);
    const P = tokens(64);
    const first = dec.decide({ tokenIds: P, promptTokens: 0 }, 0);
    const there = first.prefill.name;
    const second = dec.decide({ tokenIds: P, promptTokens: 0 }, 0);
    // There: 64 queued + 0 own; elsewhere: 0 queued + 64 own. Same 64 ms; the queued prefix saves the recompute.
    expect(ttftOf(second, there)).to.include({ pending_hit_tokens: 64, own_prefill_tokens: 0, queued_tokens: 64, predicted_ms: 64 });
    expect(second.prefill.name).to.equal(there);
  });

  it('TT15 an engine whose pool its evictions show full keeps of a Device hit only what fits beside the queued prefill ahead', async () => {
    // a: k0..k3 (the prompt, 16 tokens) and one block of another prompt, 12 tokens of another router queued. b: idle, cold.
    const other = (await blockKeys(tokens(4, 90_000)))[0]!;
    await load([instance('a:1', 0, [share(1, 12)]), instance('b:1')], [wireStream(1, 'a:1', residency([k[0]!, k[1]!, k[2]!, k[3]!, other], [DEVICE, DEVICE, DEVICE, DEVICE, DEVICE])), wireStream(2, 'b:1')]);
    // Never seen evicting: the whole hit counts, 12 queued + 0 own beat b's 16 own.
    const before = policy().decide({ tokenIds: T16, promptTokens: 0 }, view, 0);
    expect(before.prefill.name).to.equal('a:1');
    expect(ttftOf(before, 'a:1')).to.include({ device_capacity_tokens: 0, evicted_hit_tokens: 0, device_hit_tokens: 16, own_prefill_tokens: 0, predicted_ms: 12 });
    // a evicts the other block while holding 5: its pool is 20 tokens. The 12 queued tokens leave room for 8 of the 16.
    version++;
    await apply(view, delta('e1', version, { residency: [residencyChanges(1, [other], [0])] }), 0);
    const after = policy().decide({ tokenIds: T16, promptTokens: 0 }, view, 0);
    expect(ttftOf(after, 'a:1')).to.include({ device_capacity_tokens: 20, evicted_hit_tokens: 8, device_hit_tokens: 8, own_prefill_tokens: 8, predicted_ms: 20 });
    expect(after.prefill.name).to.equal('b:1');
  });

  it('TT15 what the prompts queued ahead hold counts, not only their prefill: another context cached there pushes the hit out of a full pool', async () => {
    // a's pool is 80 tokens (k0..k3 of a 64-token prompt and 4 blocks of another prompt, one evicted).
    const P = tokens(64);
    const pk = await blockKeys(P);
    const other = await blockKeys(tokens(16, 90_000));
    // Another replica's ledger on a: one request of another 64-token context, 16 new tokens of prefill (48 of it a hit there).
    const ahead = promptFingerprints(tokens(64, 50_000));
    const ledger: WireInflightShare = { router_id: 'router-x', count: 0, prompts: [], outstanding_prefill: { tokens: '16', requests: 1, prompts: [fingerprintBytes(ahead)] } };
    const resident = [...pk.slice(0, 16), ...other];
    await load([instance('a:1', 0, [ledger]), instance('b:1')], [wireStream(1, 'a:1', residency(resident, resident.map(() => DEVICE))), wireStream(2, 'b:1')]);
    version++;
    await apply(view, delta('e1', version, { residency: [residencyChanges(1, [other[3]!], [0])] }), 0);
    const d = decider(policy()).decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
    // 16 queued tokens alone would keep the whole 64-token hit (80 − 16 ≥ 64); the 64 tokens the other prompt touches leave 16.
    expect(ttftOf(d, 'a:1')).to.include({ device_capacity_tokens: 80, queued_tokens: 16, ahead_tokens: 64, evicted_hit_tokens: 48, own_prefill_tokens: 48, predicted_ms: 64 });
  });

  it('TT13 --ttft_work_slack: within it of the soonest prediction the least prefill work wins, explained; beyond it the soonest does', async () => {
    // a: idle, nothing cached: 0 + 100 = 100 ms. b: 96 of the prompt's 100 tokens on Device,
    // behind another replica's `queued` tokens: queued + 4 ms.
    const P = tokens(100);
    const k100 = await blockKeys(P);
    const device = Array.from({ length: 24 }, () => DEVICE);
    const setup = async (queued: number): Promise<void> => {
      view = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
      await load([instance('a:1'), instance('b:1', 0, [share(1, queued)])], [wireStream(1, 'a:1'), wireStream(2, 'b:1', residency(k100.slice(0, 24), device))]);
    };
    await setup(100);
    // b: 100 queued + 4 own = 104 ms, within 10% of a's 100 ms, with 4 tokens of work against 100.
    const within = policy({ ttftWorkSlack: 0.1 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0);
    expect(within.prefill.name).to.equal('b:1');
    expect(ttftOf(within, 'b:1')).to.include({ predicted_ms: 104, own_prefill_tokens: 4, note: 'within 0.1 of the soonest prediction (100 ms) with less prefill work (96 tokens fewer)' });
    expect(policy({ ttftWorkSlack: 0 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
    await setup(120);
    // b: 124 ms, beyond 110: the soonest wins.
    expect(policy({ ttftWorkSlack: 0.1 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
  });

  it('TT13 --ttft_slack_growth: a cached prefix widens the slack by the share of the soonest prediction it spares, up to 1 + growth times', async () => {
    // As above: a idle with nothing cached (100 ms), b holding 96 of the 100 tokens behind 124 queued tokens (128 ms).
    const P = tokens(100);
    const k100 = await blockKeys(P);
    await load([instance('a:1'), instance('b:1', 0, [share(1, 124)])], [wireStream(1, 'a:1'), wireStream(2, 'b:1', residency(k100.slice(0, 24), Array.from({ length: 24 }, () => DEVICE)))]);
    // Slack 0.1 alone ends at 110 ms: a.
    expect(policy({ ttftWorkSlack: 0.1, ttftSlackGrowth: 0 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
    // b spares 96 tokens, 96 ms at a's 1,000 tokens/s, 0.96 of the soonest 100 ms: 0.1 · (1 + 2 · 0.96) = 0.292, up to 129.2 ms: b, explained.
    const wide = policy({ ttftWorkSlack: 0.1, ttftSlackGrowth: 2 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0);
    expect(wide.prefill.name).to.equal('b:1');
    expect(ttftOf(wide, 'b:1')).to.include({ predicted_ms: 128, note: 'within 0.292 of the soonest prediction (100 ms) with less prefill work (96 tokens fewer)' });
    // Growth 1: 0.1 · 1.96 = 0.196, up to 119.6 ms: a.
    expect(policy({ ttftWorkSlack: 0.1, ttftSlackGrowth: 1 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
    // A slack of 0 stays the pure rule whatever the growth.
    expect(policy({ ttftWorkSlack: 0, ttftSlackGrowth: 10 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
  });

  it('TT13 --ttft_slack_growth: the same spared tokens widen the slack less beside a longer soonest prediction', async () => {
    // a idle with nothing cached on a 1,000-token prompt (1,000 ms); b holds its first 96 tokens behind 160 queued: 160 + 904 = 1,064 ms.
    const P = tokens(1000);
    const keys = await blockKeys(P);
    await load([instance('a:1'), instance('b:1', 0, [share(1, 160)])], [wireStream(1, 'a:1'), wireStream(2, 'b:1', residency(keys.slice(0, 24), Array.from({ length: 24 }, () => DEVICE)))]);
    // 96 ms spared beside 1,000: 0.05 · (1 + 2 · 0.096) = 0.0596, up to 1,059.6 ms: a, though the same 96 tokens won above.
    expect(policy({ ttftWorkSlack: 0.05, ttftSlackGrowth: 2 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
    // A flat slack of 0.0656 (up to 1,065.6 ms) lets b in: the spared share is what kept it out.
    expect(policy({ ttftWorkSlack: 0.0656, ttftSlackGrowth: 0 }).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('b:1');
  });

  it('TT13 --ttft_tie_tolerance: idle engines whose learned throughputs differ by a few percent tie, and the one holding fewer Device blocks takes a new prompt; a real difference still wins', async () => {
    // a holds another prompt's 4 blocks, b nothing; both idle. The new prompt (ids 1001..1100) is cached nowhere.
    await load([instance('a:1'), instance('b:1')], [wireStream(1, 'a:1', residency(k, [DEVICE, DEVICE, DEVICE, DEVICE])), wireStream(2, 'b:1')]);
    const P = tokens(100, 1001);
    const learned = (tolerance: number, aMs: number): TtftPolicy => {
      // The default slack keeps both (equal work): the tolerance acts on what the slack leaves.
      const p = policy({ ttftPriorSamples: 0, ttftWorkSlack: 1, ttftTieTolerance: tolerance });
      const d = decider(p).decide({ tokenIds: P, promptTokens: 0, dryRun: true }, 0);
      // One first token each: a did the 100 tokens in aMs, b in 100 ms (the prior's 1,000 tokens/s).
      p.firstToken({ ...d, prefill: { name: 'a:1', incarnation_id: 'inc-a:1' } }, aMs);
      p.firstToken({ ...d, prefill: { name: 'b:1', incarnation_id: 'inc-b:1' } }, 100);
      return p;
    };
    // a learned 100 / 97 ms: 97 against 100 ms predicted, 3% apart.
    const tied = learned(0.05, 97).decide({ tokenIds: P, promptTokens: 0 }, view, 0);
    expect(tied.prefill.name).to.equal('b:1');
    expect(tied.tie_break).to.include({ decided_by: 'kv_usage' });
    expect(ttftOf(tied, 'b:1')).to.include({ predicted_ms: 100, note: 'within 0.05 of the soonest prediction (97 ms) with as much prefill work: a tie' });
    expect(ttftOf(tied, 'a:1').predicted_ms).to.be.closeTo(97, 1e-9);
    // Without the tolerance the 3% decide.
    const pure = learned(0, 97).decide({ tokenIds: P, promptTokens: 0 }, view, 0);
    expect(pure.prefill.name).to.equal('a:1');
    expect(pure.tie_break).to.equal(undefined);
    // a 20% faster: beyond the tolerance, a.
    expect(learned(0.05, 80).decide({ tokenIds: P, promptTokens: 0 }, view, 0).prefill.name).to.equal('a:1');
  });

  it('TT7 learning: first tokens set each engine\'s throughput (a slow engine is avoided at equal queues), once per decision', async () => {
    await load([instance('a:1'), instance('b:1')]);
    const p = policy({ ttftPriorSamples: 0 });
    const dec = decider(p);
    const d = dec.decide({ tokenIds: tokens(100), promptTokens: 0, dryRun: true }, 0);
    expect(ttftOf(d, 'a:1')).to.include({ prefill_tokens_per_s: 1000, throughput_samples: 0 });
    // Observed: a did 100 tokens in 400 ms (250 tokens/s), b 100 in 50 ms (2,000 tokens/s).
    const on = (name: string): RouteDecision => ({ ...d, prefill: { name, incarnation_id: `inc-${name}` } });
    p.firstToken(on('a:1'), 400);
    p.firstToken(on('b:1'), 50);
    const after = dec.decide({ tokenIds: tokens(100), promptTokens: 0, dryRun: true }, 0);
    expect(ttftOf(after, 'a:1')).to.include({ prefill_tokens_per_s: 250, throughput_samples: 1, predicted_ms: 400 });
    expect(ttftOf(after, 'b:1')).to.include({ prefill_tokens_per_s: 2000, predicted_ms: 50 });
    expect(after.prefill.name).to.equal('b:1');
    expect(p.throughputEstimates()).to.deep.equal([
      { instance: 'a:1', tokensPerS: 250, samples: 1 },
      { instance: 'b:1', tokensPerS: 2000, samples: 1 },
    ]);
    // A tracked decision's first token is learned once, however often it is reported.
    const tracked = await dec.decideTracked({ tokenIds: tokens(100), promptTokens: 0 }, 0);
    tracked.firstToken();
    tracked.firstToken();
    expect(p.throughputEstimates().find((e) => e.instance === tracked.decision.prefill.name)!.samples).to.be.closeTo(1 + 63 / 64, 1e-9);
  });

  it('TT7 counted decisions set what a reported waiting request is worth; dry runs do not', async () => {
    await load([instance('a:1', 1), instance('b:1', 1)]);
    const dec = decider(policy());
    dec.decide({ tokenIds: tokens(500), promptTokens: 0, dryRun: true }, 0);
    expect(ttftOf(dec.decide({ tokenIds: tokens(8), promptTokens: 0, dryRun: true }, 0), 'a:1').tokens_per_waiting).to.equal(8);
    const counted = dec.decide({ tokenIds: tokens(500), promptTokens: 0 }, 0);
    expect(ttftOf(dec.decide({ tokenIds: tokens(8), promptTokens: 0, dryRun: true }, 0), counted.prefill.name).tokens_per_waiting).to.equal(500);
  });

  it('TT8 the explanation carries every term per P candidate; the D side is CAR\'s (load only)', async () => {
    await load([instance('p:1', 2, [], { type: 'PREFILL' }), instance('d:1', 1, [], { type: 'DECODE' })]);
    const d = policy().decide({ tokenIds: null, promptTokens: 256 }, view, 0);
    expect(d.prefill.name).to.equal('p:1');
    expect(d.decode).to.deep.equal({ name: 'd:1', incarnation_id: 'inc-d:1' });
    expect(ttftOf(d, 'p:1')).to.deep.equal({
      instance_name: 'p:1',
      incarnation_id: 'inc-p:1',
      role: 'prefill',
      hit_tokens: 0,
      device_hit_tokens: 0,
      host_only_hit_tokens: 0,
      kv_hit_ratio: 0,
      queue_cost: 1,
      score: 768,
      queued_tokens: 512,
      worked_off_tokens: 0,
      own_prefill_tokens: 256,
      device_capacity_tokens: 0,
      ahead_tokens: 0,
      evicted_hit_tokens: 0,
      queue_ms: 512,
      own_prefill_ms: 256,
      predicted_ms: 768,
      prefill_tokens_per_s: 1000,
      throughput_samples: 0,
      waiting_reported: 2,
      waiting_unknown: 2,
      tokens_per_waiting: 256,
      since_report_ms: 0,
      ledger_requests_own: 0,
      ledger_requests_other: 0,
      ledger_tokens_own: 0,
      ledger_tokens_other: 0,
      waiting_inflight_own: 0,
      waiting_inflight_other: 0,
      inflight_tokens_own: 0,
      inflight_tokens_other: 0,
    });
    expect(d.candidates.find((c) => c.role === 'decode')).to.include({ instance_name: 'd:1', queue_cost: 1, score: 1 });
  });

  it('TT3 without in-flight load (--car_inflight_load=false) only the reported waiting counts', async () => {
    await load([instance('a:1', 0, [share(4, 4000)]), instance('b:1', 1)]);
    const p = createPolicy(TTFT, null) as TtftPolicy;
    const d = p.decide({ tokenIds: tokens(10), promptTokens: 0 }, view, 0);
    expect(ttftOf(d, 'a:1')).to.include({ waiting_inflight_other: 0, inflight_tokens_other: 0, queued_tokens: 0 });
    expect(d.prefill.name).to.equal('a:1');
  });

  it('TT9 the view refuses a share claiming more decisions with prefill tokens than it counts, or negative tokens', () => {
    const bad = (sh: WireInflightShare): (() => unknown) => () => decodeViewUpdate(snapshot('e1', 1, [instance('a:1', 0, [sh])], []));
    expect(bad({ router_id: 'r', count: 2, prompts: [], prefill_tokens: '10', prefill_token_decisions: 3 })).to.throw(/inflight prefill_token_decisions 3 .*expected 0\.\.count \(2\)/);
    expect(bad({ router_id: 'r', count: 2, prompts: [], prefill_tokens: '-1', prefill_token_decisions: 1 })).to.throw(/prefill_tokens/);
    expect(bad({ router_id: 'r', count: 2, prompts: [], prefill_tokens: '10', prefill_token_decisions: 2 })).to.not.throw();
  });

  it("TT15 the view carries another replica's head as ages: dated from the update's receipt; a head beyond the ledger's tokens is refused", () => {
    const gauge = (o: WireInflightShare['outstanding_prefill']): WireInflightShare => ({ router_id: 'router-x', count: 0, prompts: [], outstanding_prefill: o });
    const decoded = (sh: WireInflightShare) => {
      const u = decodeViewUpdate(snapshot('e1', 1, [instance('a:1', 0, [sh])], []), 5000);
      if (u.kind !== 'snapshot') throw new Error(u.kind);
      return u.instances[0]!.inflight[0]!;
    };
    expect(decoded(gauge({ tokens: '3000', requests: 2, head_tokens: '1000', head_age_ms: 300, last_end_age_ms: 40 }))).to.include({ headTokens: 1000, headStartMs: 4700, lastEndMs: 4960 });
    expect(decoded(gauge({ tokens: '3000', requests: 2, head_tokens: '1000', head_age_ms: 300, last_end_age_ms: NO_LAST_END }))).to.include({ lastEndMs: Number.NEGATIVE_INFINITY });
    // From an older router: no head.
    expect(decoded(gauge({ tokens: '3000', requests: 2 }))).to.include({ headTokens: 0, headStartMs: Number.POSITIVE_INFINITY, lastEndMs: Number.NEGATIVE_INFINITY });
    // A ledger emptied there: no head, its last first token still dated.
    expect(decoded(gauge({ tokens: '0', requests: 0, last_end_age_ms: 70 }))).to.include({ outstandingRequests: 0, headTokens: 0, headStartMs: Number.POSITIVE_INFINITY, lastEndMs: 4930 });
    expect(() => decoded(gauge({ tokens: '30', requests: 1, head_tokens: '31', head_age_ms: 0, last_end_age_ms: 0 }))).to.throw(/expected head_tokens in \[0, tokens\]/);
    // TT17: its prompts, at most one per request.
    const fp = Buffer.from([7, 0, 0, 0, 9, 0, 0, 0]);
    expect(decoded(gauge({ tokens: '30', requests: 1, head_tokens: '30', head_age_ms: 0, last_end_age_ms: 0, prompts: [fp] })).outstandingPrompts.map((p) => [...p])).to.deep.equal([[7, 9]]);
    expect(() => decoded(gauge({ tokens: '30', requests: 1, prompts: [fp, fp] }))).to.throw(/2 outstanding_prefill\.prompts of router "router-x", at most 1/);
    // Each prompt's prefill tokens, when the router sends them: one per prompt, none beyond the total.
    const two = { tokens: '30', requests: 2, prompts: [fp, fp] };
    expect(decoded(gauge({ ...two, prompt_tokens: [20, 10] })).outstandingPromptTokens).to.deep.equal([20, 10]);
    expect(decoded(gauge(two)).outstandingPromptTokens).to.deep.equal([]);
    expect(() => decoded(gauge({ ...two, prompt_tokens: [30] }))).to.throw(/outstanding_prefill\.prompt_tokens of router "router-x": expected one integer in \[0, tokens \(30\)\] per prompt \(2\), got \[30\]/);
    expect(() => decoded(gauge({ ...two, prompt_tokens: [31, 0] }))).to.throw(/prompt_tokens .*got \[31,0\]/);
  });

  it("TT17 another replica's ledger prompt credits its prefix where it is queued, until its first token (no load report ends it)", async () => {
    // b: another replica's 1,000-token request before its first token, whose prompt is the first
    // 96 tokens of this one: by the time this one runs there, they are cached.
    const P = tokens(100);
    const fps = promptFingerprints(P, 64);
    const ledger: WireInflightShare = {
      router_id: 'router-x',
      count: 0,
      prompts: [],
      // No head: its age would be dated on the real clock the view decodes with, not the test's.
      outstanding_prefill: { tokens: '96', requests: 1, prompts: [fingerprintBytes(fps.subarray(0, 6))] },
    };
    await load([instance('a:1', 0), instance('b:1', 1, [ledger])]);
    const d = policy().decide({ tokenIds: P, promptTokens: 0, promptFingerprints: fps }, view, 0);
    expect(ttftOf(d, 'b:1')).to.include({ pending_hit_tokens: 96, own_prefill_tokens: 4, ledger_requests_other: 1, queued_tokens: 96 });
    expect(d.prefill.name).to.equal('b:1');
  });

  it('TT7 the proxy times a first token only where the answer starts with it: a stream, or a single generated token', () => {
    expect(firstTokenVisible({ stream: true, max_tokens: 100 })).to.equal(true);
    expect(firstTokenVisible({ max_tokens: 1 })).to.equal(true);
    expect(firstTokenVisible({ max_completion_tokens: 1 })).to.equal(true);
    expect(firstTokenVisible({ max_tokens: 2 })).to.equal(false);
    expect(firstTokenVisible({ stream: 'true' })).to.equal(false);
    expect(firstTokenVisible({})).to.equal(false);
    expect(firstTokenVisible([])).to.equal(false);
    expect(firstTokenVisible(null)).to.equal(false);
  });
});
