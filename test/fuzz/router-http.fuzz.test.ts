// routing.md "HTTP API" end to end under a seeded mutation fuzzer: mutated `/v1/route` and query
// bodies (test/fuzz/corpus/router-body: token-level and structural JSON mutations, invalid UTF-8,
// empty and oversized bodies) POSTed over real HTTP to the real RouterHttpServer, over a real
// ViewCache holding a two-instance view and the CAR policy. Every answer must be 200, 400, 413 or
// 503 (no candidate) with a JSON body, never a 5xx crash; /health keeps answering; RSS growth
// over the run stays bounded. FUZZ_SEED reproduces a run, FUZZ_ITERATIONS lengthens it.
import { expect } from 'chai';
import { createPolicy } from '../../router-svc/policy/create-policy.js';
import { RouteDecider } from '../../router-svc/http/route-decider.js';
import { KV_QUERY_PATH, ROUTE_PATH, RouterHttpServer } from '../../router-svc/http/router-http-server.js';
import { RouterMetrics } from '../../router-svc/http/router-metrics.js';
import { ViewCache } from '../../router-svc/viewcache/view-cache.js';
import { MIB, describeGrowth, exposedGc } from './lib/memory.js';
import { Rng } from './lib/rng.js';
import { fuzzIterations, fuzzSeed } from './lib/knobs.js';
import { loadCorpus } from './lib/corpus.js';
import { mutateBytes } from './lib/byte-mutations.js';
import { mutateJsonText } from './lib/json-mutations.js';
import { runFuzzLoad } from './lib/http-load.js';
import { apply, blockKeys, residency, snapshot, tokens, wireInstance, wireStream } from '../unit/router/view-fixtures.js';

const SEED = fuzzSeed();
const MAX_BODY_BYTES = 256 * 1024;
const HANG_MS = 15_000;
const PARALLEL = 4;

const corpus = loadCorpus('router-body').map((c) => new TextDecoder().decode(c.bytes));

interface Case {
  readonly path: string;
  readonly body: Uint8Array;
}

/** Input i of the run: a pure function of (seed, i). */
function caseFor(i: number): Case {
  const rng = Rng.forIteration(SEED, i);
  const path = rng.chance(0.5) ? ROUTE_PATH : KV_QUERY_PATH;
  const seed = rng.pick(corpus);
  const roll = rng.int(100);
  if (roll < 2) return { path, body: new Uint8Array(0) };
  if (roll < 4) return { path, body: new Uint8Array(MAX_BODY_BYTES + 1 + rng.int(1024)).fill(0x20) };
  let body: Uint8Array = new TextEncoder().encode(rng.chance(0.9) ? mutateJsonText(rng, seed, corpus) : seed);
  if (roll < 12) body = mutateBytes(rng, body);
  return { path, body };
}

function show(c: Case): string {
  const text = Buffer.from(c.body).toString('utf8');
  return `POST ${c.path} ${JSON.stringify(text.length > 2000 ? `${text.slice(0, 2000)}… (${c.body.length} bytes)` : text)}`;
}

describe(`routing.md HTTP API under a seeded mutation fuzzer (FUZZ_SEED=${SEED})`, function () {
  this.timeout(180_000);
  let server: RouterHttpServer | null = null;

  afterEach(async () => {
    await server?.close();
    server = null;
  });

  it('answers only 200, 400, 413 or 503 with a JSON body, keeps serving /health, and RSS growth stays bounded', async () => {
    const view = new ViewCache({ staleAfterMs: 600_000 });
    const keys = await blockKeys(tokens(16));
    await apply(
      view,
      snapshot('fuzz-epoch', 1, [wireInstance('a:1'), wireInstance('b:1')], [
        wireStream(1, 'a:1', { ...residency(keys.slice(0, 3), [1, 3, 2]), device_blocks: '2', host_blocks: '2' }),
        wireStream(2, 'b:1', { synchronized: false, error: 'gap: expected 3, got 5' }),
      ]),
      Date.now(),
    );
    const metrics = new RouterMetrics(() => ({ version: 1, lagMs: 0, staleForMs: 0 }));
    const policy = createPolicy({ loadBalancePolicy: 'CAR', carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null });
    server = await RouterHttpServer.start({
      port: 0,
      host: '127.0.0.1',
      view,
      decider: new RouteDecider(policy, view, metrics, 'CAR'),
      proxy: null,
      metrics,
      internalApiToken: '',
      maxBodyBytes: MAX_BODY_BYTES,
    });
    const url = `http://127.0.0.1:${server.port}`;
    const iterations = fuzzIterations(300);
    const statuses: Record<string, number> = {};

    const send = async (i: number): Promise<void> => {
      const c = caseFor(i);
      let status: number;
      let text: string;
      try {
        const res = await fetch(`${url}${c.path}`, { method: 'POST', body: Buffer.from(c.body), signal: AbortSignal.timeout(HANG_MS) });
        status = res.status;
        text = await res.text();
      } catch (e) {
        throw new Error(`FUZZ_SEED=${SEED} iteration ${i}: no answer (${e instanceof Error ? e.message : String(e)})\n${show(c)}`);
      }
      const where = `FUZZ_SEED=${SEED} iteration ${i}: HTTP ${status} ${text.slice(0, 300)}\n${show(c)}`;
      expect([200, 400, 413, 503], where).to.include(status);
      expect(() => JSON.parse(text) as unknown, where).to.not.throw();
      statuses[status] = (statuses[status] ?? 0) + 1;
    };
    const health = async (): Promise<void> => {
      const r = await fetch(`${url}/health`);
      expect(r.status, 'health during the fuzz run').to.equal(200);
      await r.text();
    };

    const growth = await runFuzzLoad(iterations, PARALLEL, send, health);
    console.log(`      statuses ${JSON.stringify(statuses)}; ${describeGrowth(growth)}`);
    expect(growth.rssBytes, 'RSS growth over the run').to.be.lessThan(256 * MIB);
    if (exposedGc() !== null) expect(growth.heapBytes, 'heap growth after gc').to.be.lessThan(64 * MIB);
    expect(statuses[200] ?? 0, 'answered requests').to.be.greaterThan(0);
    expect(statuses[400] ?? 0, 'rejected requests').to.be.greaterThan(0);
  });
});
