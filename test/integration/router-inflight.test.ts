/**
 * routing.md "In-flight load" across real processes: two router-svc processes (CAR) watching one
 * directory-svc process, which discovers four simulated engines through a real etcd.
 *
 *   SimEngine ×4 ──etcd/heartbeat/ZMQ──▶ directory-svc ◀──ReportInflight── router 1, router 2
 *                                              └──────────WatchView──────▶ (both)
 *
 * The engines heartbeat once (A waiting 0, B/C/D waiting 2) and then not for the test's length,
 * so every router sees the same stale queues: without in-flight load every request would go to A.
 * Waits poll a condition; nothing asserts a duration (entries live 2 s, far beyond propagation).
 */
import { expect } from 'chai';
import { waitFor } from '../helpers/ports.js';
import { RouterProcess, RouterTestStack, type SimEngine } from '../helpers/router-stack.js';

const NAMESPACE = 'router-inflight-test';

interface Candidate {
  instance_name: string;
  role: string;
  queue_cost: number;
  waiting_reported: number;
  waiting_inflight_own: number;
  waiting_inflight_other: number;
}
interface RouteAnswer {
  prefill: { name: string };
  claim_order?: { claim_seq: number; held_ms: number; moved_from?: string };
  candidates: (Candidate & { hit_tokens: number; pending_hit_tokens?: number })[];
}

async function route(url: string, dryRun: boolean, tokenIds: number[] | null = null): Promise<{ status: number; answer: RouteAnswer }> {
  const body = tokenIds === null ? { prompt_tokens: 64, dry_run: dryRun } : { token_ids: tokenIds, dry_run: dryRun };
  const res = await fetch(`${url}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, answer: (await res.json()) as RouteAnswer };
}

describe('routing.md In-flight load: two router processes do not herd', function () {
  this.timeout(90000);
  let stack: RouterTestStack;
  const engines: SimEngine[] = [];
  const routers: RouterProcess[] = [];

  before(async () => {
    stack = await RouterTestStack.start(NAMESPACE);
    engines.push(...(await stack.startQuietEngines([0, 2, 2, 2].map((waiting) => ({ waiting })))));
    routers.push(
      ...(await stack.spawnRouters(
        2,
        // A claim waits for the directory to carry it back; the default 20 ms is within the round
        // trip of a machine busy with the rest of the suite (the first decision then stands, unordered).
        ['--load_balance_policy=CAR', '--log_level=warn', '--car_claim_wait_ms=1000'],
        async (r) => {
          const res = await route(r.url, true).catch(() => null);
          return res !== null && res.status === 200 && res.answer.candidates.length === 4;
        },
        'router sees the four engines as candidates',
      )),
    );
  });

  after(async () => {
    for (const r of routers) await r.stop();
    for (const e of engines) await e.close();
    await stack?.close();
  });

  const a = (): string => engines[0]!.name;

  it("router 2 sees router 1's decisions through the directory, and a burst on both spreads across the candidates", async () => {
    const [r1, r2] = routers as [(typeof routers)[0], (typeof routers)[0]];
    // Router 1: A (waiting 0) takes two, its own count makes A = 2 like the others.
    for (let i = 0; i < 2; i++) expect((await route(r1.url, false)).answer.prefill.name).to.equal(a());
    const seen = await waitFor(
      async () => {
        const { answer } = await route(r2.url, true);
        const c = answer.candidates.find((x) => x.instance_name === a())!;
        return c.waiting_inflight_other === 2 ? c : null;
      },
      10000,
      "router 2's view carries router 1's two decisions for A",
    );
    expect(seen).to.include({ waiting_reported: 0, waiting_inflight_own: 0, waiting_inflight_other: 2, queue_cost: 1 });

    // The burst: 4 requests on each router at once, identical (same prompt length, no cache).
    const burst = await Promise.all([r1, r2, r1, r2, r1, r2, r1, r2].map((r) => route(r.url, false)));
    const perEngine = new Map<string, number>();
    for (const b of burst) {
      expect(b.status).to.equal(200);
      perEngine.set(b.answer.prefill.name, (perEngine.get(b.answer.prefill.name) ?? 0) + 1);
    }
    // Without in-flight load all 8 would go to A (queue cost 0 against 1 everywhere else).
    expect(perEngine.size, JSON.stringify([...perEngine])).to.be.greaterThanOrEqual(3);
    expect(Math.max(...perEngine.values()), JSON.stringify([...perEngine])).to.be.at.most(4);
  });

  it("pending prefix credit: a prompt router 1 routed reaches router 2 with its decision, which credits its prefix there before any KV event", async () => {
    const [r1, r2] = routers as [(typeof routers)[0], (typeof routers)[0]];
    // Ids no engine holds; the engines never see the prompt (/v1/route does not forward), so only the decision can credit it.
    const prompt = Array.from({ length: 512 }, (_, i) => 1_000_000 + i);
    const x = (await route(r1.url, false, prompt)).answer.prefill.name;
    const onR2 = await waitFor(
      async () => {
        const c = (await route(r2.url, true, prompt)).answer.candidates.find((k) => k.instance_name === x && k.role === 'prefill')!;
        return (c.pending_hit_tokens ?? 0) > 0 ? c : null;
      },
      10000,
      "router 2 credits router 1's pending prompt on its instance",
    );
    expect(onR2).to.include({ pending_hit_tokens: 512, hit_tokens: 512 });
    expect(onR2.waiting_inflight_other).to.be.greaterThanOrEqual(1);
    const others = (await route(r2.url, true, prompt)).answer.candidates.filter((k) => k.instance_name !== x && k.role === 'prefill');
    expect(others.map((k) => k.pending_hit_tokens)).to.deep.equal([0, 0, 0]);
  });

  it('claim order: two cold requests of one new prefix sent to both routers at once land on one engine', async function () {
    const [r1, r2] = routers as [(typeof routers)[0], (typeof routers)[0]];
    // Each router must have seen the other's in-flight share (claims are ordered only among replicas).
    await route(r1.url, false);
    await route(r2.url, false);
    for (const [r, other] of [[r1, r2], [r2, r1]] as const) {
      await waitFor(
        async () => (await route(r.url, true)).answer.candidates.some((c) => c.waiting_inflight_other > 0),
        10000,
        `${r.url} sees ${other.url}'s decisions`,
      );
    }
    // Pairs of new prefixes, both halves at once: both cold, each router's first choice is its own
    // (ties rotate from each router's id); the later claim in the directory's order follows the earlier.
    // On a loaded machine the second half may be decided after the first's claim reached its view:
    // then it is warm (pending credit on the first's instance), follows it without waiting, and
    // lands on the same engine too. Either way each half is an ordered claim or such a follower.
    const placements: string[] = [];
    const ordered = (a: RouteAnswer): boolean => (a.claim_order?.claim_seq ?? -1) >= 0;
    const followed = (a: RouteAnswer): boolean => a.claim_order === undefined && (a.candidates.find((c) => c.instance_name === a.prefill.name && c.role === 'prefill')?.pending_hit_tokens ?? 0) > 0;
    let bothOrdered = 0;
    // Five pairs, more (up to PAIRS) until two were decided cold on both routers at once.
    const PAIRS = 10;
    for (let k = 0; k < PAIRS && (k < 5 || bothOrdered < 2); k++) {
      // From idle queues: the previous pair's decisions (never answered, /v1/route) hold their
      // instance for the in-flight TTL, and a claim that moves for that load while the other
      // replica follows its first placement is the crossing docs/design/decisions.md records as a
      // known limit; this scenario is the one the name says, one new prefix on two replicas.
      for (const r of [r1, r2]) {
        await waitFor(
          async () => (await route(r.url, true)).answer.candidates.every((c) => c.waiting_inflight_own === 0 && c.waiting_inflight_other === 0),
          10000,
          `${r.url} sees no decision in flight`,
        );
      }
      const prompt = Array.from({ length: 256 }, (_, i) => 2_000_000 + k * 1000 + i);
      const [x, y] = await Promise.all([route(r1.url, false, prompt), route(r2.url, false, prompt)]);
      expect(x.status).to.equal(200);
      expect(y.status).to.equal(200);
      const how = (a: RouteAnswer): string => (a.claim_order === undefined ? 'warm' : (a.claim_order.moved_from ?? '-'));
      placements.push(`${x.answer.prefill.name}/${y.answer.prefill.name} moved ${how(x.answer)}/${how(y.answer)}`);
      for (const a of [x.answer, y.answer]) expect(ordered(a) || followed(a), `${placements.join('; ')}: ${JSON.stringify(a.claim_order ?? null)}`).to.equal(true);
      if (ordered(x.answer) && ordered(y.answer)) bothOrdered++;
      expect(x.answer.prefill.name, placements.join('; ')).to.equal(y.answer.prefill.name);
    }
    // Every pair landed on one engine. If no pair was decided cold on both routers at once (each
    // second half already warm: a machine so loaded that the relay beat the second router), the
    // ordering itself was not exercised, and the test says so rather than pass.
    if (bothOrdered === 0) this.skip();
  });
});
