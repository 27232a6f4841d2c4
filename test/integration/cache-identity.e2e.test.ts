// cache-identity §7 (CI1–CI9) end to end over real processes: a directory-svc reading an engines
// file (no etcd: --etcd_addr=), a CAR router-svc with per-model tokenizers (--models_file), and
// simulated vLLM engines publishing vLLM's event shapes (map form, lora_name, per-block
// extra_keys, group_idx / kv_cache_spec_kind). Shapes the simulator never publishes (multimodal
// items, embeddings, SGLang salts, REMOTE locality, lora_id without a name) come from publishers
// this test drives, for streams listed in the same engines file. Credit is read three ways: the
// directory's gRPC Query, the router's /v1/route and query endpoint, and the proxy (the openai
// client; the engine's usage.prompt_tokens_details.cached_tokens is what it really reused).
//
//   openai client ──▶ router-svc (CAR; qwen3 → Qwen3 tokenizer, llama-3.1 → Llama 3.1) ──proxy──▶ engines
//                        ▲ WatchView
//   directory-svc --engines_file ◀──ZMQ── qwen-a (qwen3 + sql-lora), qwen-b (qwen3), llama (llama-3.1),
//        ▲ Query, ListStreams,             hybrid (gemma-3, --hybrid_sliding_window): SimProcess, vLLM kind
//        │ ListInstances (test)  ◀──ZMQ── vision (vLLM), sglang (SGLang): RankPublisher in this process,
//        │                                 /health, /metrics, /v1/models from a simulator front
//   one fleet for the whole file; CI5 adds RR and SLO_AWARE routers, and a one-model directory + router.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { FLEET_BLOCK_SIZE, FleetDirectory, SimProcess } from '../helpers/engines-fleet.js';
import { chatTokenIds } from '../helpers/chat-token-ids.js';
import { raised } from '../helpers/openai-errors.js';
import { waitFor } from '../helpers/ports.js';
import { RouterProcess } from '../helpers/router-stack.js';
import { ScriptedEngine } from '../helpers/scripted-engine.js';

const BLOCK = FLEET_BLOCK_SIZE;
const MODELS_PERIOD_MS = 1000;
const LOAD_PERIOD_MS = 250;
const INSTANCE_HEADER = 'x-kv-router-instance';
const QUERY_PATH = '/v1/internal/kv-cache/query';
const QWEN_DIR = bundledQwen3TokenizerDir();
const LLAMA_DIR = bundledLlama31TokenizerDir();
/** What an event takes to reach the directory's index and then the router's view, on a loaded machine. */
const SETTLE_MS = 20000;

const QWEN = 'qwen3';
const LORA = 'sql-lora';
const LLAMA = 'llama-3.1';
const HYBRID = 'gemma-3';
const VISION = 'llava-1.5';
const SGLANG = 'mistral-7b';
/** The sliding window of the hybrid engine's group 1, in tokens. */
const WINDOW = 8;
const HYBRID_CAPACITY_BLOCKS = 16;

/** `n` token ids from `start`: every test uses its own range, so the shared fleet's tests never share a prefix. */
function span(start: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => start + i);
}

/** Tokens of the complete blocks of a prompt of `n` tokens: what any cache can hold of it. */
function whole(n: number): number {
  return Math.floor(n / BLOCK) * BLOCK;
}

interface Identity {
  readonly model?: string;
  readonly cache_salt?: string;
}

interface RouteCandidate {
  instance_name: string;
  role: string;
  hit_tokens: number;
  queue_cost: number;
}

interface RouteAnswer {
  prefill: { name: string };
  input_tokens: number;
  token_source: string;
  candidates: RouteCandidate[];
  identity: { model: string | null; model_given: boolean; lora_name: string | null; salted: boolean };
  excluded_for_model: { instance_name: string; models: string[] }[];
}

interface StatusAnswer {
  instances: { name: string; candidate: boolean }[];
  streams: { instance_name: string; synchronized: boolean }[];
}

/** A router process and the calls this suite makes on it. */
class RouterUnderTest {
  readonly client: OpenAI;

  constructor(readonly proc: RouterProcess) {
    this.client = new OpenAI({ baseURL: `${proc.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }

  post(path: string, body: unknown): Promise<Response> {
    return fetch(`${this.proc.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  }

  /** A dry run: an explanation only, no in-flight load added. */
  async route(body: Record<string, unknown>): Promise<RouteAnswer> {
    const res = await this.post('/v1/route', { ...body, dry_run: true });
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as RouteAnswer;
  }

  /**
   * `route` once no candidate shows a queue: a load report sent while an earlier request was in
   * flight would otherwise weigh against the engine holding the prefix (CAR: miss vs queue).
   */
  async routeIdle(body: Record<string, unknown>): Promise<RouteAnswer> {
    return waitFor(async () => {
      const a = await this.route(body);
      return a.candidates.every((c) => c.queue_cost === 0) ? a : null;
    }, SETTLE_MS, `no queue on the candidates of ${JSON.stringify(body).slice(0, 80)}`);
  }

  /** The router's query endpoint: instance → device hit tokens, for the streams of the identity's candidates. */
  async hits(tokens: readonly number[], identity: Identity = {}): Promise<Record<string, number>> {
    const res = await this.post(QUERY_PATH, { token_ids: tokens, ...identity });
    expect(res.status, await res.clone().text()).to.equal(200);
    const answer = (await res.json()) as { matches: { instance_name: string; synchronized: boolean; device_hit_tokens: number }[] };
    return Object.fromEntries(answer.matches.map((m) => [m.instance_name, m.synchronized ? m.device_hit_tokens : -1]));
  }

  /** A completion of token ids through the proxy: the engine that served it and what it reused. */
  async complete(model: string, tokens: readonly number[], cacheSalt?: string): Promise<{ engine: string; cached: number }> {
    const params = { model, prompt: [...tokens], max_tokens: 1, ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }) } as OpenAI.CompletionCreateParamsNonStreaming;
    const { data, response } = await this.client.completions.create(params).withResponse();
    expect(data.object).to.equal('text_completion');
    return { engine: response.headers.get(INSTANCE_HEADER) ?? '', cached: data.usage?.prompt_tokens_details?.cached_tokens ?? -1 };
  }

  async metric(line: RegExp): Promise<number> {
    const text = await (await fetch(`${this.proc.url}/metrics`)).text();
    const m = text.split('\n').find((l) => line.test(l));
    return m === undefined ? 0 : Number(m.split(' ').pop());
  }

  /** Until exactly `names` are routing candidates, each with synchronized streams, in the router's own view. */
  async untilCandidates(names: readonly string[]): Promise<void> {
    const want = [...names].sort().join(',');
    await waitFor(
      async () => {
        const status = (await (await fetch(`${this.proc.url}/v1/status`)).json()) as StatusAnswer;
        const candidates = status.instances.filter((i) => i.candidate).map((i) => i.name).sort().join(',');
        const streams = status.streams.filter((s) => names.includes(s.instance_name));
        return candidates === want && streams.length === names.length && streams.every((s) => s.synchronized);
      },
      60000,
      `exactly [${want}] routable in ${this.proc.url}'s view`,
    );
  }

  stop(): Promise<number | null> {
    return this.proc.stop();
  }
}

describe('cache-identity §7 CI1–CI9 end to end (directory, routers, simulated vLLM engines, scripted publishers)', function () {
  this.timeout(180000);
  let tmp: string;
  let qwenA: SimProcess;
  let qwenB: SimProcess;
  let llama: SimProcess;
  let hybrid: SimProcess;
  let vision: ScriptedEngine;
  let sglang: ScriptedEngine;
  let dir: FleetDirectory;
  let router: RouterUnderTest;
  const ALL = ['qwen-a', 'qwen-b', 'llama', 'hybrid', 'vision', 'sglang'];

  before(async function () {
    this.timeout(120000);
    tmp = mkdtempSync(join(tmpdir(), 'cache-identity-e2e-'));
    [qwenA, qwenB, llama, hybrid, vision, sglang] = await Promise.all([
      SimProcess.start('qwen-a', { args: [`--served_models=${QWEN},${LORA}`, `--tokenizer=${QWEN_DIR}`] }),
      SimProcess.start('qwen-b', { args: [`--served_models=${QWEN}`, `--tokenizer=${QWEN_DIR}`] }),
      SimProcess.start('llama', { args: [`--served_models=${LLAMA}`, `--tokenizer=${LLAMA_DIR}`] }),
      SimProcess.start('hybrid', { deviceCapacityBlocks: HYBRID_CAPACITY_BLOCKS, args: [`--served_models=${HYBRID}`, `--hybrid_sliding_window=${WINDOW}`] }),
      ScriptedEngine.start('vision', { kind: 'vllm', servedModels: VISION }),
      ScriptedEngine.start('sglang', { kind: 'sglang', servedModels: SGLANG }),
    ]);
    // Every list is scraped from /v1/models but vision's, which the engines file pins (cache-identity §1).
    // Loads are scraped every 250 ms and go stale after three periods: on a loaded machine a
    // shorter period can drop an engine from the candidates for a moment.
    dir = await FleetDirectory.start([qwenA.entry(), qwenB.entry(), llama.entry(), hybrid.entry(), vision.entry({ models: [VISION] }), sglang.entry()], {
      etcdAddr: '',
      refreshIntervalMs: LOAD_PERIOD_MS,
      args: [`--engines_models_refresh_ms=${MODELS_PERIOD_MS}`],
    });
    const modelsFile = join(tmp, 'models.json');
    writeFileSync(modelsFile, JSON.stringify({ models: [{ model: QWEN, tokenizer: QWEN_DIR }, { model: LLAMA, tokenizer: LLAMA_DIR }] }));
    router = new RouterUnderTest(await RouterProcess.start(`127.0.0.1:${dir.grpcPort}`, ['--load_balance_policy=CAR', `--models_file=${modelsFile}`, '--log_level=warn']));
    await router.untilCandidates(ALL);
  });

  after(async () => {
    await router?.stop();
    await dir?.close();
    await vision?.close();
    await sglang?.close();
    await stopAllProcesses();
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
  });

  /** The directory's gRPC Query: instance → device hit tokens (-1: not synchronized), candidates of the identity only. */
  async function directoryHits(tokens: readonly number[], identity: Identity = {}): Promise<Record<string, number>> {
    const r = await dir.query(tokens, identity);
    return Object.fromEntries(r.matches.map((m) => [m.instance_name, m.synchronized ? m.device_hit_tokens : -1]));
  }

  /** Until the directory, then the router's view, credit `instance` with `tokens` under `identity`. */
  async function untilCredited(instance: string, tokens: readonly number[], identity: Identity, hit: number): Promise<void> {
    await waitFor(async () => (await directoryHits(tokens, identity))[instance] === hit, SETTLE_MS, `${instance} credited ${hit} under ${JSON.stringify(identity)} by the directory`);
    await waitFor(async () => (await router.hits(tokens, identity))[instance] === hit, SETTLE_MS, `${instance} credited ${hit} under ${JSON.stringify(identity)} in the router's view`);
  }

  /** `/v1/route`'s prefill candidates as instance → hit tokens. */
  function prefillHits(a: RouteAnswer): Record<string, number> {
    return Object.fromEntries(a.candidates.filter((c) => c.role === 'prefill').map((c) => [c.instance_name, c.hit_tokens]));
  }

  async function listStreamsRow(name: string): Promise<Awaited<ReturnType<FleetDirectory['streams']>>[number]> {
    const rows = await dir.streams(name);
    expect(rows, name).to.have.length(1);
    return rows[0]!;
  }

  async function skipped(instance: string, reason: string): Promise<number> {
    const m = new RegExp(`^kv_skipped_total\\{instance="${instance}",dp_rank="0",reason="${reason}"\\} (\\d+)$`, 'm').exec(await dir.metricsText());
    return m === null ? -1 : Number(m[1]);
  }

  it('CI1 LoRA credit: blocks stored under lora_name sql-lora credit sql-lora requests only; base requests get none of them, and sql-lora requests none of the base blocks', async () => {
    const lora = span(1000, 18);
    const base = span(1100, 18);
    // Through the proxy: sql-lora is served by qwen-a alone; qwen-a publishes lora_name and extra_keys per block.
    expect((await router.complete(LORA, lora)).engine).to.equal('qwen-a');
    expect((await qwenA.complete(base, { model: QWEN })).status).to.equal(200);
    await untilCredited('qwen-a', lora, { model: LORA }, whole(18));
    await untilCredited('qwen-a', base, { model: QWEN }, whole(18));

    // The directory's Query: an adapter's candidates are the instances listing it; base keys never match LoRA keys.
    expect(await directoryHits(lora, { model: LORA })).to.deep.equal({ 'qwen-a': 16 });
    expect(await directoryHits(lora, { model: QWEN })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });
    expect(await directoryHits(base, { model: LORA })).to.deep.equal({ 'qwen-a': 0 });
    expect(await directoryHits(base, { model: QWEN })).to.deep.equal({ 'qwen-a': 16, 'qwen-b': 0 });

    // The router's /v1/route explains the identity and who it left out; the query endpoint agrees.
    const asLora = await router.route({ model: LORA, token_ids: lora });
    expect(asLora.identity).to.deep.equal({ model: LORA, model_given: true, lora_name: LORA, salted: false });
    expect(prefillHits(asLora)).to.deep.equal({ 'qwen-a': 16 });
    expect(asLora.excluded_for_model.map((e) => e.instance_name).sort()).to.deep.equal(['hybrid', 'llama', 'qwen-b', 'sglang', 'vision']);
    expect(asLora.excluded_for_model.find((e) => e.instance_name === 'qwen-b')!.models).to.deep.equal([QWEN]);
    const asBase = await router.route({ model: QWEN, token_ids: lora });
    expect(asBase.identity).to.deep.include({ model: QWEN, lora_name: null, salted: false });
    expect(prefillHits(asBase)).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });
    expect(await router.hits(base, { model: LORA })).to.deep.equal({ 'qwen-a': 0 });

    // What the engine reuses is what the router credited.
    expect(await router.complete(LORA, lora)).to.deep.equal({ engine: 'qwen-a', cached: 16 });
  });

  it('CI2 salt: a chain salted on block 0 is credited only with the same cache_salt; unsalted and other salts get none; LoRA + salt matches only both', async () => {
    const salted = span(2000, 18);
    expect((await qwenB.complete(salted, { model: QWEN, cache_salt: 'tenant-a' })).status).to.equal(200);
    await untilCredited('qwen-b', salted, { model: QWEN, cache_salt: 'tenant-a' }, 16);
    expect(await directoryHits(salted, { model: QWEN })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });
    expect(await directoryHits(salted, { model: QWEN, cache_salt: 'tenant-b' })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });
    expect(await router.hits(salted, { model: QWEN })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });

    await router.routeIdle({ model: QWEN, cache_salt: 'tenant-a', token_ids: salted });
    const res = await router.post('/v1/route', { model: QWEN, cache_salt: 'tenant-a', token_ids: salted, dry_run: true });
    const text = await res.text();
    expect(text, 'the salt itself is never shown').to.not.include('tenant-a');
    const a = JSON.parse(text) as RouteAnswer;
    expect(a.identity).to.deep.equal({ model: QWEN, model_given: true, lora_name: null, salted: true });
    expect([a.prefill.name, prefillHits(a)]).to.deep.equal(['qwen-b', { 'qwen-a': 0, 'qwen-b': 16 }]);

    // LoRA + salt, through the proxy (the body reaches the engine unchanged, so it salts too).
    const both = span(2100, 18);
    expect((await router.complete(LORA, both, 'tenant-a')).engine).to.equal('qwen-a');
    await untilCredited('qwen-a', both, { model: LORA, cache_salt: 'tenant-a' }, 16);
    for (const other of [{ model: LORA }, { model: LORA, cache_salt: 'tenant-b' }, { model: QWEN, cache_salt: 'tenant-a' }, { model: QWEN }]) {
      expect((await directoryHits(both, other))['qwen-a'], JSON.stringify(other)).to.equal(0);
      expect((await router.hits(both, other))['qwen-a'], JSON.stringify(other)).to.equal(0);
    }
    expect(await router.complete(LORA, both, 'tenant-a')).to.deep.equal({ engine: 'qwen-a', cached: 16 });
  });

  it('CI3 multimodal items and prompt embeddings are never credited and count as skipped{reason=multimodal}; a text chain beside them is unaffected', async () => {
    const image = span(3000, 8);
    const embeds = span(3100, 4);
    const text = span(3200, 8);
    const mixed = span(3300, 8);
    const stored = (hashes: number[], tokens: number[], extraKeys: unknown[] | null): WireEvent => ({
      type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: tokens, block_size: BLOCK, lora_id: null, medium: 'GPU', lora_name: null,
      group_idx: 0, kv_cache_spec_kind: 'full_attention', ...(extraKeys === null ? {} : { extra_keys: extraKeys }),
    });
    // vLLM's per-block extra keys: (identifier, offset) items of an image, a prompt embedding's bytes.
    await vision.publish([
      stored([301, 302], image, [[['sha256:img-1', 0]], [['sha256:img-1', 0]]]),
      stored([311], embeds, [[new Uint8Array([0x3f, 0x80, 0x00, 0x00, 0xbf, 0x80, 0x00, 0x00])]]),
      stored([321, 322], text, null),
      stored([331, 332], mixed, [null, [['sha256:img-2', 2]]]),
    ]);
    await untilCredited('vision', text, { model: VISION }, 8);
    expect(await directoryHits(image, { model: VISION })).to.deep.equal({ vision: 0 });
    expect(await directoryHits(embeds, { model: VISION })).to.deep.equal({ vision: 0 });
    expect(await directoryHits(mixed, { model: VISION })).to.deep.equal({ vision: 4 });
    expect(prefillHits(await router.route({ model: VISION, token_ids: image }))).to.deep.equal({ vision: 0 });
    expect(prefillHits(await router.route({ model: VISION, token_ids: mixed }))).to.deep.equal({ vision: 4 });
    // Two image blocks, one embedding block, the second block of the mixed chain.
    expect(await skipped('vision', 'multimodal')).to.equal(4);
    const row = await listStreamsRow('vision');
    expect([row.state, row.counters.skipped_multimodal, row.device_blocks]).to.deep.equal(['SYNCHRONIZED', '4', '3']);
  });

  it('CI4 hybrid: group 1 (sliding_window) stores add nothing and its removals leave group 0 credited; group 0 removals (evictions) remove it', async () => {
    const first = span(4000, 8 * BLOCK + 2);
    expect((await hybrid.complete(first)).status).to.equal(200);
    await untilCredited('hybrid', first, { model: HYBRID }, 8 * BLOCK);
    // Group 1 re-stored the 8 hashes, then removed the blocks its window passed: ⌊(34 − 8 + 1) / 4⌋ = 6.
    const row = await listStreamsRow('hybrid');
    expect([row.state, row.device_blocks, row.counters.skipped_group, Object.keys(row.counters.sync_lost)]).to.deep.equal(['SYNCHRONIZED', '8', '14', []]);
    expect(await skipped('hybrid', 'group')).to.equal(14);
    expect(prefillHits(await router.route({ model: HYBRID, token_ids: first }))).to.deep.equal({ hybrid: 32 });

    // A prompt that fills the engine's 16 blocks: group 0 evicts every block of the first one.
    const second = span(4100, HYBRID_CAPACITY_BLOCKS * BLOCK);
    expect((await hybrid.complete(second)).status).to.equal(200);
    await untilCredited('hybrid', second, { model: HYBRID }, HYBRID_CAPACITY_BLOCKS * BLOCK);
    await untilCredited('hybrid', first, { model: HYBRID }, 0);
    // The engine agrees: sent again, it reuses nothing of the first prompt.
    expect(await router.complete(HYBRID, first)).to.deep.equal({ engine: 'hybrid', cached: 0 });
    expect(Object.keys((await listStreamsRow('hybrid')).counters.sync_lost)).to.deep.equal([]);
  });

  it('CI5 two base models: each model\'s requests land only on its engines under CAR, RR and SLO_AWARE; an unknown model is 404 in vLLM\'s shape; a missing model is 400 with two base models', async () => {
    const [rr, slo] = await Promise.all(['RR', 'SLO_AWARE'].map(async (policy) => new RouterUnderTest(await RouterProcess.start(`127.0.0.1:${dir.grpcPort}`, [`--load_balance_policy=${policy}`, '--log_level=warn']))));
    try {
      await Promise.all([rr!.untilCandidates(ALL), slo!.untilCandidates(ALL)]);
      let n = 0;
      for (const [policy, r] of [['CAR', router], ['RR', rr!], ['SLO_AWARE', slo!]] as const) {
        const served: Record<string, string[]> = { [QWEN]: [], [LLAMA]: [] };
        for (let i = 0; i < 4; i++) {
          for (const model of [QWEN, LLAMA]) served[model]!.push((await r.complete(model, span(5000 + 20 * n++, 6))).engine);
        }
        expect(new Set(served[LLAMA]), `${policy}: ${LLAMA}`).to.deep.equal(new Set(['llama']));
        expect(served[QWEN]!.every((e) => e === 'qwen-a' || e === 'qwen-b'), `${policy}: ${QWEN} → ${served[QWEN]!.join()}`).to.equal(true);
        // RR keeps a turn per model: the qwen3 requests alternate between its two engines.
        if (policy === 'RR') expect(new Set(served[QWEN]), 'RR').to.deep.equal(new Set(['qwen-a', 'qwen-b']));
        // The same through /v1/route: the candidates are the model's engines.
        expect(Object.keys(prefillHits(await r.route({ model: QWEN, token_ids: span(5900, 8) }))).sort(), policy).to.deep.equal(['qwen-a', 'qwen-b']);
        expect(Object.keys(prefillHits(await r.route({ model: LLAMA, token_ids: span(5900, 8) }))), policy).to.deep.equal(['llama']);
      }

      // An unknown model: vLLM's 404 object, read by the client as NotFoundError, on every endpoint.
      const unknown = await raised(rr!.client.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'hi' }] }));
      expect(unknown).to.be.instanceOf(OpenAI.NotFoundError);
      expect([unknown.status, unknown.type, unknown.param, unknown.message]).to.deep.equal([404, 'NotFoundError', 'model', '404 The model `gpt-9` does not exist.']);
      const res = await router.post('/v1/completions', { model: 'gpt-9', prompt: [1, 2, 3] });
      expect([res.status, await res.json()]).to.deep.equal([404, { error: { message: 'The model `gpt-9` does not exist.', type: 'NotFoundError', param: 'model', code: 404 } }]);
      const routed = await slo!.post('/v1/route', { model: 'gpt-9', token_ids: [1, 2, 3] });
      expect(routed.status).to.equal(404);

      // No model while several base models are served: 400 naming the field and the models.
      const missing = await raised(router.client.completions.create({ model: undefined as unknown as string, prompt: [1, 2, 3, 4, 5] }));
      expect(missing).to.be.instanceOf(OpenAI.BadRequestError);
      expect(missing.param).to.equal('model');
      for (const m of [QWEN, LLAMA, HYBRID, VISION, SGLANG]) expect(missing.message).to.include(m);
    } finally {
      await rr?.stop();
      await slo?.stop();
    }
  });

  it('CI5 a missing model is allowed when the fleet serves one base model (a second directory listing the llama engine alone)', async () => {
    const one = await FleetDirectory.start([llama.entry()], { etcdAddr: '', refreshIntervalMs: LOAD_PERIOD_MS, args: [`--engines_models_refresh_ms=${MODELS_PERIOD_MS}`] });
    try {
      const r = new RouterUnderTest(await RouterProcess.start(`127.0.0.1:${one.grpcPort}`, ['--load_balance_policy=CAR', '--log_level=warn']));
      try {
        await r.untilCandidates(['llama']);
        const { data, response } = await r.client.completions.create({ model: undefined as unknown as string, prompt: span(5950, 6), max_tokens: 1 }).withResponse();
        expect([response.headers.get(INSTANCE_HEADER), data.object]).to.deep.equal(['llama', 'text_completion']);
        const a = await r.route({ token_ids: span(5950, 6) });
        expect(a.identity).to.deep.equal({ model: LLAMA, model_given: false, lora_name: null, salted: false });
        expect((await r.client.models.list()).data.map((m) => m.id)).to.deep.equal([LLAMA]);
      } finally {
        await r.stop();
      }
    } finally {
      await one.close();
    }
  });

  it('CI6 an adapter loaded at run time appears in ListInstances and the router\'s /v1/models within one models period; unloaded, it disappears and its requests no longer reach the engine', async () => {
    const adapter = 'chat-lora';
    const load = await fetch(`${qwenB.url}/v1/load_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: adapter, lora_path: '/adapters/chat-lora' }) });
    expect(load.status, await load.clone().text()).to.equal(200);
    const loadedAt = performance.now();
    await waitFor(async () => (await dir.models('qwen-b'))?.join() === `${QWEN},${adapter}<${QWEN}`, MODELS_PERIOD_MS + 4000, 'the adapter in ListInstances within one period');
    await waitFor(async () => (await router.client.models.list()).data.some((m) => m.id === adapter), 5000, "the adapter in the router's /v1/models");
    expect(performance.now() - loadedAt).to.be.below(MODELS_PERIOD_MS + 5000);
    const listed = (await router.client.models.list()).data as (OpenAI.Models.Model & { parent: string | null })[];
    // Base models by name, each followed by its adapters.
    expect(listed.map((m) => [m.id, m.parent])).to.deep.equal([
      [HYBRID, null],
      [LLAMA, null],
      [VISION, null],
      [SGLANG, null],
      [QWEN, null],
      [adapter, QWEN],
      [LORA, QWEN],
    ]);
    // Served by the one engine that holds it, as a LoRA chain under its own name.
    const tokens = span(6000, 10);
    expect((await router.complete(adapter, tokens)).engine).to.equal('qwen-b');
    await untilCredited('qwen-b', tokens, { model: adapter }, 8);
    expect(await directoryHits(tokens, { model: QWEN })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });

    const unload = await fetch(`${qwenB.url}/v1/unload_lora_adapter`, { method: 'POST', body: JSON.stringify({ lora_name: adapter }) });
    expect(unload.status).to.equal(200);
    await waitFor(async () => (await dir.models('qwen-b'))?.join() === QWEN, MODELS_PERIOD_MS + 4000, 'the adapter gone from ListInstances within one period');
    await waitFor(async () => !(await router.client.models.list()).data.some((m) => m.id === adapter), 5000, "the adapter gone from the router's /v1/models");
    const refusedBefore = await router.metric(/^router_proxy_requests_total\{.*outcome="unknown_model".*\} /);
    const gone = await raised(router.client.completions.create({ model: adapter, prompt: tokens, max_tokens: 1 }));
    expect(gone).to.be.instanceOf(OpenAI.NotFoundError);
    // The router answered it: no engine lists the adapter any more.
    expect(await router.metric(/^router_proxy_requests_total\{.*outcome="unknown_model".*\} /)).to.equal(refusedBefore + 1);
  });

  it('CI7 per-model tokenizers: chats to qwen3 and llama-3.1 are tokenized by their own tokenizer and template and credited exactly where they were served', async () => {
    type Message = { role: 'system' | 'user' | 'assistant'; content: string };
    const system: Message = { role: 'system', content: 'You are the routing assistant. Answer in one short sentence.' };
    for (const [model, tokenizerDir] of [[QWEN, QWEN_DIR], [LLAMA, LLAMA_DIR]] as const) {
      const first: Message[] = [system, { role: 'user', content: `Which engine holds my ${model} conversation?` }];
      const ids = await chatTokenIds(tokenizerDir, first);
      const { data, response } = await router.client.chat.completions.create({ model, messages: first, max_tokens: 4 }).withResponse();
      const engine = response.headers.get(INSTANCE_HEADER)!;
      expect(engine, model).to.be.oneOf(model === QWEN ? ['qwen-a', 'qwen-b'] : ['llama']);
      // The router counts the chat as the model's own tokenizer does, and credits every complete block on that engine.
      await waitFor(async () => prefillHits(await router.route({ model, messages: first }))[engine] === whole(ids.length), SETTLE_MS, `${model} chat resident on ${engine}`);
      const again = await router.routeIdle({ model, messages: first });
      expect([again.token_source, again.input_tokens, again.prefill.name], model).to.deep.equal(['tokenizer', ids.length, engine]);

      // The next turn resends the history: the router's credit is what the engine then reuses.
      const second: Message[] = [...first, { role: 'assistant', content: data.choices[0]!.message.content ?? '' }, { role: 'user', content: 'And the next turn?' }];
      const credit = await router.routeIdle({ model, messages: second });
      expect(credit.prefill.name, model).to.equal(engine);
      const hit = prefillHits(credit)[engine]!;
      expect(hit, model).to.be.greaterThan(0);
      const reply = await router.client.chat.completions.create({ model, messages: second, max_tokens: 4 }).withResponse();
      expect([reply.response.headers.get(INSTANCE_HEADER), reply.data.usage?.prompt_tokens_details?.cached_tokens], model).to.deep.equal([engine, hit]);
    }
    // The two tokenizers differ: the same chat is a different id sequence under each.
    const probe: Message[] = [{ role: 'user', content: 'Hello there!' }];
    expect(await chatTokenIds(QWEN_DIR, probe)).to.not.deep.equal(await chatTokenIds(LLAMA_DIR, probe));

    // Streaming through the proxy: chunks from the model's engine, then the end of the stream.
    const { data: stream, response } = await router.client.chat.completions.create({ model: LLAMA, messages: probe, max_tokens: 3, stream: true }).withResponse();
    expect(response.headers.get(INSTANCE_HEADER)).to.equal('llama');
    const chunks: string[] = [];
    for await (const chunk of stream) chunks.push(chunk.object);
    expect(chunks).to.deep.equal(['chat.completion.chunk', 'chat.completion.chunk', 'chat.completion.chunk']);
  });

  it('CI8 SGLang: cache_salt (map field and trailing metadata) salts the chain; locality "REMOTE" is an unserved tier; lora_id without lora_name is out of scope', async () => {
    const mapSalted = span(7000, 8);
    const metaSalted = span(7100, 8);
    const remote = span(7200, 8);
    const loraId = span(7300, 8);
    const plain = span(7400, 8);
    const stored = (hashes: number[], tokens: number[], extra: Record<string, unknown> = {}): WireEvent => ({
      type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: tokens, block_size: BLOCK, lora_id: null, medium: 'GPU', ...extra,
    });
    await sglang.publish([
      stored([701, 702], mapSalted, { cache_salt: 'tenant-a' }),
      // SGLang's positional BlockStoredWithMetadata: the metadata map after the medium.
      ['BlockStored', [711, 712], null, metaSalted, BLOCK, null, 'GPU', { cache_salt: 'tenant-b' }],
      stored([721, 722], remote, { locality: 'REMOTE' }),
      stored([731, 732], loraId, { lora_id: 3 }),
      stored([741, 742], plain),
    ]);
    await untilCredited('sglang', plain, { model: SGLANG }, 8);
    await untilCredited('sglang', mapSalted, { model: SGLANG, cache_salt: 'tenant-a' }, 8);
    await untilCredited('sglang', metaSalted, { model: SGLANG, cache_salt: 'tenant-b' }, 8);
    const cases: [number[], Identity, number][] = [
      [mapSalted, { model: SGLANG }, 0],
      [mapSalted, { model: SGLANG, cache_salt: 'tenant-b' }, 0],
      [metaSalted, { model: SGLANG }, 0],
      [metaSalted, { model: SGLANG, cache_salt: 'tenant-a' }, 0],
      [remote, { model: SGLANG }, 0],
      [loraId, { model: SGLANG }, 0],
    ];
    for (const [tokens, identity, hit] of cases) expect(await directoryHits(tokens, identity), `${tokens[0]} ${JSON.stringify(identity)}`).to.deep.equal({ sglang: hit });
    expect(prefillHits(await router.route({ model: SGLANG, cache_salt: 'tenant-b', token_ids: metaSalted }))).to.deep.equal({ sglang: 8 });
    const row = await listStreamsRow('sglang');
    expect([row.engine_kind, row.state, row.counters.skipped_medium, row.counters.skipped_out_of_scope, row.device_blocks]).to.deep.equal(['sglang', 'SYNCHRONIZED', '2', '2', '6']);
    expect([await skipped('sglang', 'medium'), await skipped('sglang', 'out_of_scope')]).to.deep.equal([2, 2]);
  });

  it('CI9 identity never crosses streams: the same tokens under two identities on two engines are credited each to its own, through the directory, /v1/route and the proxy', async () => {
    // Salt s1 on qwen-a, salt s2 on qwen-b; then the LoRA chain on qwen-a beside the plain one on qwen-b.
    const tokens = span(9000, 18);
    const plainOrLora = span(9100, 18);
    await Promise.all([
      qwenA.complete(tokens, { model: QWEN, cache_salt: 's1' }),
      qwenB.complete(tokens, { model: QWEN, cache_salt: 's2' }),
      qwenA.complete(plainOrLora, { model: LORA }),
      qwenB.complete(plainOrLora, { model: QWEN }),
    ]);
    await untilCredited('qwen-a', tokens, { model: QWEN, cache_salt: 's1' }, 16);
    await untilCredited('qwen-b', tokens, { model: QWEN, cache_salt: 's2' }, 16);
    await untilCredited('qwen-a', plainOrLora, { model: LORA }, 16);
    await untilCredited('qwen-b', plainOrLora, { model: QWEN }, 16);

    const expected: [number[], Identity, Record<string, number>, string][] = [
      [tokens, { model: QWEN, cache_salt: 's1' }, { 'qwen-a': 16, 'qwen-b': 0 }, 'qwen-a'],
      [tokens, { model: QWEN, cache_salt: 's2' }, { 'qwen-a': 0, 'qwen-b': 16 }, 'qwen-b'],
      [plainOrLora, { model: QWEN }, { 'qwen-a': 0, 'qwen-b': 16 }, 'qwen-b'],
      [plainOrLora, { model: LORA }, { 'qwen-a': 16 }, 'qwen-a'],
    ];
    for (const [t, identity, hits, engine] of expected) {
      const what = JSON.stringify(identity);
      expect(await directoryHits(t, identity), `directory ${what}`).to.deep.equal(hits);
      expect(await router.hits(t, identity), `query endpoint ${what}`).to.deep.equal(hits);
      const a = await router.routeIdle({ ...identity, token_ids: t });
      expect([a.prefill.name, prefillHits(a)], `/v1/route ${what}`).to.deep.equal([engine, hits]);
    }
    // Unsalted, nothing anywhere holds the salted chains.
    expect(await directoryHits(tokens, { model: QWEN })).to.deep.equal({ 'qwen-a': 0, 'qwen-b': 0 });
    // The proxy sends each identity to the engine holding it, which reuses exactly the credit.
    for (const [t, identity, , engine] of expected) {
      await router.routeIdle({ ...identity, token_ids: t });
      expect(await router.complete(identity.model!, t, identity.cache_salt), `proxy ${JSON.stringify(identity)}`).to.deep.equal({ engine, cached: 16 });
    }
  });
});
