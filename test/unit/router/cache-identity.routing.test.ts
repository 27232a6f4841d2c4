/**
 * cache-identity §2 (the router's half of CI1, CI2, CI5): a request's model restricts its
 * candidates under every policy, its adapter and salt key its prompt, and no identity is credited
 * with another's blocks or pending prompts. Real ViewCache (decoded wire updates), real policies
 * through the RouteDecider, and a real HTTP port for the answers clients read.
 *
 * Fleet (block_size 4, all DEFAULT, idle, one synchronized stream each):
 *   q1:1  qwen3 + sql-lora (adapter of qwen3)     q2:1  qwen3 + sql-lora
 *   l1:1  llama                                    l2:1  llama
 */
import { expect } from 'chai';
import { IdentityResolver } from '../../../router-svc/identity/identity-resolver.js';
import { ANY_IDENTITY, type RequestIdentity } from '../../../router-svc/identity/request-identity.js';
import { InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { RouterHttpServer } from '../../../router-svc/http/router-http-server.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import { isRouterHttpError } from '../../../router-svc/http/router-http-errors.js';
import { parseIdentityFields, resolveIdentity } from '../../../router-svc/http/request-identity-fields.js';
import { createPolicy } from '../../../router-svc/policy/create-policy.js';
import type { RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { OpenAiProxy } from '../../../router-svc/proxy/openai-proxy.js';
import { PromptResolver } from '../../../router-svc/proxy/prompt-resolver.js';
import { UpstreamForwarder } from '../../../router-svc/proxy/upstream-forwarder.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { keyIdentity, PLAIN_IDENTITY } from '../../../shared/keys/cache-identity.js';
import { fingerprintBytes, fingerprintSeed, MAX_PROMPT_GRANULES, PLAIN_FINGERPRINT_SEED, promptFingerprints } from '../../../shared/keys/prompt-fingerprint.js';
import { silentLogger } from '../../../shared/log/logger.js';
import type { WireServedModels, WireViewInstance, WireViewStream } from '../../../shared/view/view-wire.js';
import { apply, blockKeys, delta, DEVICE, explained, residency, served, snapshot, testDecider, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const POLICIES = ['CAR', 'RR', 'SLO_AWARE', 'TTFT'] as const;
/** The policies that match prompts (credit hits and pending prefixes). */
const MATCHING = ['CAR', 'TTFT'] as const;
type Policy = (typeof POLICIES)[number];
const flags = (policy: Policy) => ({ loadBalancePolicy: policy, carPrefillLambda: 0.8, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null }) as const;
const QWEN = ['q1:1', 'q2:1'];
const LLAMA = ['l1:1', 'l2:1'];
/** 16 tokens: 4 blocks of 4, one 16-token fingerprint granule. */
const P = tokens(16, 100);

function inst(name: string, models: WireServedModels | null, over: Partial<WireViewInstance> = {}): WireViewInstance {
  return wireInstance(name, { load: { ...wireLoad(0), reported_at_ms: '10' }, models, ...over });
}

/** A synchronized stream of `name` holding `keys` on Device. */
function held(id: number, name: string, keys: Uint8Array[] = []): WireViewStream {
  return wireStream(id, name, { ...residency(keys, keys.map(() => DEVICE)), device_blocks: String(keys.length) });
}

async function viewOf(instances: WireViewInstance[], streams: WireViewStream[]): Promise<ViewCache> {
  const view = new ViewCache({ staleAfterMs: 600_000 });
  await apply(view, snapshot('e1', 1, instances, streams), Date.now());
  return view;
}

/** The two-model fleet, with `keys` resident per instance name. */
async function fleet(keys: Record<string, Uint8Array[]> = {}): Promise<ViewCache> {
  const names = [...QWEN, ...LLAMA];
  return viewOf(
    names.map((n) => inst(n, n.startsWith('q') ? served('qwen3', 'sql-lora') : served('llama'))),
    names.map((n, i) => held(i + 1, n, keys[n] ?? [])),
  );
}

/** The identity of a request body's `model` and `cache_salt`, as the HTTP edge resolves it. */
function identityOf(resolver: IdentityResolver, body: Record<string, unknown>): RequestIdentity {
  return resolveIdentity(resolver, parseIdentityFields(body));
}

function prefillNames(d: RouteDecision): string[] {
  return d.candidates.filter((c) => c.role === 'prefill').map((c) => c.instance_name);
}

/** The RouterHttpError `fn` throws: [status, class, param, message]. */
function failure(fn: () => unknown): [number, string, string | null, string] {
  try {
    fn();
  } catch (e) {
    if (isRouterHttpError(e)) return [e.httpStatus, e.class, e.param, e.reason];
    throw e;
  }
  throw new Error('expected a RouterHttpError');
}

describe('cache-identity §2 request identity: candidates, keys and pending credit per identity', () => {
  for (const policy of POLICIES) {
    it(`CI5 two base models under ${policy}: each model's requests land only on its engines, and its engines share its load`, async () => {
      const view = await fleet();
      const resolver = new IdentityResolver(view);
      const decider = testDecider(view, flags(policy));
      const landed: Record<string, string[]> = { qwen3: [], llama: [] };
      // Alternating models: a cursor shared by both would send every qwen3 request to the same engine.
      for (let i = 0; i < 8; i++) {
        for (const model of ['qwen3', 'llama']) {
          const d = decider.decide({ tokenIds: P, promptTokens: P.length, identity: identityOf(resolver, { model }), dryRun: true }, 0);
          expect(prefillNames(d), `${model} candidates`).to.deep.equal(model === 'qwen3' ? QWEN : LLAMA);
          landed[model]!.push(d.prefill.name);
        }
      }
      expect(new Set(landed['qwen3']), 'qwen3 engines used').to.deep.equal(new Set(QWEN));
      expect(new Set(landed['llama']), 'llama engines used').to.deep.equal(new Set(LLAMA));
      // An adapter's requests go to the instances listing it (both qwen3 engines here).
      const lora = decider.decide({ tokenIds: P, promptTokens: P.length, identity: identityOf(resolver, { model: 'sql-lora' }) }, 0);
      expect(prefillNames(lora)).to.deep.equal(QWEN);
    });
  }

  it('CI5 an unknown model is a 404 in vLLM\'s shape; a missing one a 400 naming model and the models served with two base models', async () => {
    const resolver = new IdentityResolver(await fleet());
    expect(failure(() => identityOf(resolver, { model: 'gpt-9' }))).to.deep.equal([404, 'unknown_model', 'model', 'The model `gpt-9` does not exist.']);
    const [status, cls, param, message] = failure(() => identityOf(resolver, {}));
    expect([status, cls, param]).to.deep.equal([400, 'bad_request', 'model']);
    expect(message).to.equal('model is required: the instances serve several base models (llama, qwen3)');
    // A salt does not stand in for a model.
    expect(failure(() => identityOf(resolver, { cache_salt: 's' }))[0]).to.equal(400);
  });

  it('CI5 a missing model is allowed with one base model (and its adapters): the request is that model\'s, base keys', async () => {
    const view = await viewOf([inst('q1:1', served('qwen3', 'sql-lora')), inst('q2:1', served('qwen3'))], [held(1, 'q1:1'), held(2, 'q2:1')]);
    const identity = identityOf(new IdentityResolver(view), {});
    expect(identity).to.include({ model: 'qwen3', modelGiven: false, loraName: null, salted: false, keys: PLAIN_IDENTITY });
    const d = testDecider(view, flags('CAR')).decide({ tokenIds: P, promptTokens: P.length, identity }, 0);
    expect(prefillNames(d)).to.deep.equal(QWEN);
  });

  it('unknown lists (cache-identity §1): candidates for every model; a model only they may serve goes to them alone, never a 404; no lists named at all: any instance', async () => {
    const view = await viewOf([inst('q1:1', served('qwen3')), inst('u1:1', null), inst('u2:1', null)], [held(1, 'q1:1'), held(2, 'u1:1'), held(3, 'u2:1')]);
    const resolver = new IdentityResolver(view);
    const decider = testDecider(view, flags('RR'));
    const decide = (body: Record<string, unknown>): string[] => prefillNames(decider.decide({ tokenIds: null, promptTokens: 4, identity: identityOf(resolver, body) }, 0));
    expect(decide({ model: 'qwen3' })).to.deep.equal(['q1:1', 'u1:1', 'u2:1']);
    expect(decide({ model: 'mystery' })).to.deep.equal(['u1:1', 'u2:1']);
    expect(decide({ model: 'another-mystery' })).to.deep.equal(['u1:1', 'u2:1']);
    // Without a model: the one base model named (qwen3) with the unknown lists.
    expect(decide({})).to.deep.equal(['q1:1', 'u1:1', 'u2:1']);
    // A listed model whose instances cannot take it is a 503 naming the model.
    await apply(view, delta('e1', 2, { instance_upserts: [inst('q1:1', served('qwen3'), { load: null }), inst('u1:1', null, { load: null }), inst('u2:1', null, { load: null })] }), Date.now());
    expect(() => decide({ model: 'qwen3' })).to.throw(/none of 3 instances serving model `qwen3` is schedulable/);
    const unknownOnly = await viewOf([inst('u1:1', null)], [held(1, 'u1:1')]);
    expect(identityOf(new IdentityResolver(unknownOnly), {})).to.equal(ANY_IDENTITY);
    // An empty view names no model: not a 404 (the engines may just not be in the view yet), the decision's 503.
    const empty = await viewOf([], []);
    const id = identityOf(new IdentityResolver(empty), { model: 'qwen3' });
    expect(() => testDecider(empty, flags('CAR')).decide({ tokenIds: P, promptTokens: 16, identity: id }, 0)).to.throw(/no instance serving a model no list names \(only instances with an unknown list\) in the directory view/);
  });

  it('wrong types are 400s naming the field: model not a string, cache_salt empty or not a string; model "" or null is no model', async () => {
    const resolver = new IdentityResolver(await viewOf([inst('q1:1', served('qwen3'))], [held(1, 'q1:1')]));
    expect(failure(() => identityOf(resolver, { model: 7 }))).to.deep.equal([400, 'bad_request', 'model', 'model must be a string']);
    const saltError = [400, 'bad_request', 'cache_salt', "Parameter 'cache_salt' must be a non-empty string if provided."];
    expect(failure(() => identityOf(resolver, { model: 'qwen3', cache_salt: '' }))).to.deep.equal(saltError);
    expect(failure(() => identityOf(resolver, { model: 'qwen3', cache_salt: 42 }))).to.deep.equal(saltError);
    expect(identityOf(resolver, { model: '' }).model).to.equal('qwen3');
    expect(identityOf(resolver, { model: null, cache_salt: null }).salted).to.equal(false);
  });

  for (const policy of MATCHING) {
    it(`CI1 router half under ${policy}: an adapter request is matched under the adapter's identity only, a base request only under the base's`, async () => {
      // q1 holds P's chain as sql-lora computed it, q2 the base model's chain of the same tokens.
      const view = await fleet({ 'q1:1': await blockKeys(P, 4, 1024, keyIdentity('sql-lora', null)), 'q2:1': await blockKeys(P) });
      const resolver = new IdentityResolver(view);
      const decider = testDecider(view, flags(policy));
      const lora = decider.decide({ tokenIds: P, promptTokens: 16, identity: identityOf(resolver, { model: 'sql-lora' }), dryRun: true }, 0);
      expect(lora.prefill.name).to.equal('q1:1');
      expect(explained(lora, 'q1:1').hit_tokens).to.equal(16);
      expect(explained(lora, 'q2:1').hit_tokens, 'base blocks credited to an adapter request').to.equal(0);
      const base = decider.decide({ tokenIds: P, promptTokens: 16, identity: identityOf(resolver, { model: 'qwen3' }), dryRun: true }, 0);
      expect(base.prefill.name).to.equal('q2:1');
      expect(explained(base, 'q1:1').hit_tokens, 'adapter blocks credited to a base request').to.equal(0);
      expect(explained(base, 'q2:1').hit_tokens).to.equal(16);
    });
  }

  it('CI2 router half: a chain salted s on block 0 is credited only to cache_salt s; LoRA + salt only to both', async () => {
    const view = await fleet({
      'q1:1': await blockKeys(P, 4, 1024, keyIdentity(null, 'tenant-a')),
      'q2:1': await blockKeys(P, 4, 1024, keyIdentity('sql-lora', 'tenant-a')),
    });
    const resolver = new IdentityResolver(view);
    const decider = testDecider(view, flags('CAR'));
    const hits = (body: Record<string, unknown>): number[] => {
      const d = decider.decide({ tokenIds: P, promptTokens: 16, identity: identityOf(resolver, body), dryRun: true }, 0);
      return QWEN.map((n) => explained(d, n).hit_tokens);
    };
    expect(hits({ model: 'qwen3', cache_salt: 'tenant-a' })).to.deep.equal([16, 0]);
    expect(hits({ model: 'qwen3' })).to.deep.equal([0, 0]);
    expect(hits({ model: 'qwen3', cache_salt: 'tenant-b' })).to.deep.equal([0, 0]);
    expect(hits({ model: 'sql-lora', cache_salt: 'tenant-a' })).to.deep.equal([0, 16]);
    expect(hits({ model: 'sql-lora' })).to.deep.equal([0, 0]);
  });

  for (const policy of MATCHING) {
    it(`pending prefix credit never crosses identities under ${policy}: own and other routers' prompts in flight credit only their own identity`, async () => {
      const view = await fleet();
      const resolver = new IdentityResolver(view);
      const inflight = new InflightLoad({ routerId: 'router-me', monotonicMs: () => 1000 });
      const decider = testDecider(view, flags(policy), inflight, true);
      const salted = identityOf(resolver, { model: 'qwen3', cache_salt: 's1' });
      const first = decider.decide({ tokenIds: P, promptTokens: 16, identity: salted }, 0);
      const there = first.prefill.name;
      const pendingFor = (identity: RequestIdentity, name: string): number | undefined =>
        explained(decider.decide({ tokenIds: P, promptTokens: 16, identity, dryRun: true }, 0), name).pending_hit_tokens;
      expect(pendingFor(salted, there)).to.equal(16);
      expect(pendingFor(identityOf(resolver, { model: 'qwen3' }), there)).to.equal(0);
      expect(pendingFor(identityOf(resolver, { model: 'qwen3', cache_salt: 's2' }), there)).to.equal(0);
      expect(pendingFor(identityOf(resolver, { model: 'sql-lora', cache_salt: 's1' }), there)).to.equal(0);
      // Another replica's in-flight prompt, as the view carries it (fingerprints seeded with its identity).
      const other = there === 'q1:1' ? 'q2:1' : 'q1:1';
      const lora = identityOf(resolver, { model: 'sql-lora' });
      const share = { router_id: 'router-x', count: 1, prompts: [fingerprintBytes(promptFingerprints(P, MAX_PROMPT_GRANULES, lora.fingerprintSeed))] };
      await apply(view, delta('e1', 2, { instance_upserts: [inst(other, served('qwen3', 'sql-lora'), { inflight: [share] })] }), Date.now());
      expect(pendingFor(lora, other)).to.equal(16);
      expect(pendingFor(identityOf(resolver, { model: 'qwen3' }), other)).to.equal(0);
    });
  }

  it('fingerprint seeds: the plain identity keeps the plain chain; LoRA, salt and both each seed their own', () => {
    expect(fingerprintSeed(PLAIN_IDENTITY)).to.equal(PLAIN_FINGERPRINT_SEED);
    expect(promptFingerprints(P, MAX_PROMPT_GRANULES, PLAIN_FINGERPRINT_SEED)).to.deep.equal(promptFingerprints(P));
    const seeds = [PLAIN_IDENTITY, keyIdentity('a', null), keyIdentity(null, 'a'), keyIdentity('a', 'a'), keyIdentity('b', null)].map(fingerprintSeed);
    expect(new Set(seeds).size).to.equal(seeds.length);
    const chains = seeds.map((s) => promptFingerprints(P, MAX_PROMPT_GRANULES, s)[0]);
    expect(new Set(chains).size).to.equal(chains.length);
  });

  it('identities are cached per (model, salt) and rebuilt when the served models change, not on load reports', async () => {
    const view = await fleet();
    const resolver = new IdentityResolver(view);
    const a = identityOf(resolver, { model: 'qwen3', cache_salt: 's' });
    expect(identityOf(resolver, { model: 'qwen3', cache_salt: 's' })).to.equal(a);
    await apply(view, delta('e1', 2, { instance_upserts: [inst('q1:1', served('qwen3', 'sql-lora'), { load: { ...wireLoad(3), reported_at_ms: '11' } })] }), Date.now());
    expect(identityOf(resolver, { model: 'qwen3', cache_salt: 's' }), 'a load report keeps the identity').to.equal(a);
    // sql-lora unloaded everywhere: no longer listed, every list known — its requests are now a 404.
    await apply(view, delta('e1', 3, { instance_upserts: [inst('q1:1', served('qwen3')), inst('q2:1', served('qwen3'))] }), Date.now());
    expect(failure(() => identityOf(resolver, { model: 'sql-lora' }))[0]).to.equal(404);
  });
});

describe('cache-identity §2 over HTTP: the OpenAI error object on every path, /v1/route\'s explanation, GET /v1/models', () => {
  let server: RouterHttpServer;
  let base: string;

  before(async () => {
    const view = await fleet({ 'q1:1': await blockKeys(P, 4, 1024, keyIdentity('sql-lora', 'tenant-a')) });
    const metrics = new RouterMetrics(() => ({ version: 1, lagMs: 0, staleForMs: 0 }));
    const decider = new RouteDecider(createPolicy(flags('CAR')), view, metrics, 'CAR');
    const identities = new IdentityResolver(view);
    const prompts = new PromptResolver(null, metrics);
    const proxy = new OpenAiProxy({ decider, prompts, identities, forwarder: new UpstreamForwarder(), metrics, logger: silentLogger, maxBodyBytes: 1 << 20, clock: Date.now });
    server = await RouterHttpServer.start({ port: 0, host: '127.0.0.1', view, decider, prompts, identities, proxy, metrics, internalApiToken: '' });
    base = `http://127.0.0.1:${server.port}`;
  });
  after(async () => server.close());

  async function post(path: string, body: unknown): Promise<{ status: number; json: any; text: string }> {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, json: JSON.parse(text), text };
  }

  const PATHS: { path: string; body: Record<string, unknown> }[] = [
    { path: '/v1/completions', body: { prompt: 'hello', max_tokens: 1 } },
    { path: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'hello' }] } },
    { path: '/v1/route', body: { token_ids: P } },
    { path: '/v1/internal/kv-cache/query', body: { token_ids: P } },
  ];

  it('CI5 every OpenAI path (and /v1/route, the query endpoint): an unknown model is exactly vLLM\'s 404 object', async () => {
    for (const { path, body } of PATHS) {
      const r = await post(path, { ...body, model: 'gpt-9' });
      expect(r.status, path).to.equal(404);
      expect(r.json, path).to.deep.equal({ error: { message: 'The model `gpt-9` does not exist.', type: 'NotFoundError', param: 'model', code: 404 } });
    }
  });

  it('every path: a bad model or cache_salt is a BadRequestError naming it; a missing model with two base models too, except on the query endpoint (model optional there)', async () => {
    for (const { path, body } of PATHS) {
      const badModel = await post(path, { ...body, model: ['qwen3'] });
      expect([badModel.status, badModel.json.error.type, badModel.json.error.param, badModel.json.error.code], path).to.deep.equal([400, 'BadRequestError', 'model', 400]);
      const badSalt = await post(path, { ...body, model: 'qwen3', cache_salt: '' });
      expect([badSalt.status, badSalt.json.error.param], path).to.deep.equal([400, 'cache_salt']);
      const missing = await post(path, body);
      if (path === '/v1/internal/kv-cache/query') {
        expect(missing.status).to.equal(200);
        expect(missing.json.matches.map((m: { instance_name: string }) => m.instance_name)).to.deep.equal([...LLAMA, ...QWEN]);
      } else {
        expect([missing.status, missing.json.error.param], path).to.deep.equal([400, 'model']);
        expect(missing.json.error.message, path).to.include('llama').and.include('qwen3');
      }
    }
  });

  it('/v1/route explains the identity it used (model, lora_name, salted, never the salt) and the instances left out for serving another model', async () => {
    const r = await post('/v1/route', { token_ids: P, model: 'sql-lora', cache_salt: 'tenant-a', dry_run: true });
    expect(r.status).to.equal(200);
    expect(r.json.identity).to.deep.equal({ model: 'sql-lora', model_given: true, lora_name: 'sql-lora', salted: true });
    expect(r.json.excluded_for_model).to.deep.equal([
      { instance_name: 'l1:1', models: ['llama'] },
      { instance_name: 'l2:1', models: ['llama'] },
    ]);
    expect(r.json.prefill.name).to.equal('q1:1');
    expect(r.text).to.not.include('tenant-a');
    const plain = await post('/v1/route', { token_ids: P, model: 'llama', dry_run: true });
    expect(plain.json.identity).to.deep.equal({ model: 'llama', model_given: true, lora_name: null, salted: false });
    expect(plain.json.excluded_for_model.map((e: { instance_name: string }) => e.instance_name)).to.deep.equal(QWEN);
  });

  it('the query endpoint with a model lists that model\'s streams only, keyed under its identity', async () => {
    const r = await post('/v1/internal/kv-cache/query', { token_ids: P, model: 'sql-lora', cache_salt: 'tenant-a' });
    expect(r.json.matches.map((m: { instance_name: string; device_hit_tokens: number }) => [m.instance_name, m.device_hit_tokens])).to.deep.equal([
      ['q1:1', 16],
      ['q2:1', 0],
    ]);
    const unsalted = await post('/v1/internal/kv-cache/query', { token_ids: P, model: 'sql-lora' });
    expect(unsalted.json.matches.map((m: { device_hit_tokens: number }) => m.device_hit_tokens)).to.deep.equal([0, 0]);
  });

  it('GET /v1/models is the union of the candidates\' lists in OpenAI form; other methods are 405 objects', async () => {
    const res = await fetch(`${base}/v1/models`);
    expect(res.status).to.equal(200);
    const list = (await res.json()) as { object: string; data: { id: string; object: string; owned_by: string; parent: string | null; created: number }[] };
    expect(list.object).to.equal('list');
    expect(list.data.map((m) => [m.id, m.parent])).to.deep.equal([
      ['llama', null],
      ['qwen3', null],
      ['sql-lora', 'qwen3'],
    ]);
    for (const m of list.data) expect(m).to.include({ object: 'model', owned_by: 'kv-cache-router' }).and.have.property('created').that.is.a('number');
    const wrong = await post('/v1/models', {});
    expect(wrong.status).to.equal(405);
    expect(wrong.json.error).to.include({ type: 'MethodNotAllowedError', code: 405 });
  });
});
