/**
 * The stack's demo: a few prompts sharing a system prefix, sent as token ids through the router's
 * OpenAI proxy, twice. Before each request the router's query endpoint tells how many of the
 * prompt's tokens each engine already holds (its view of the directory's index, routing.md); the
 * proxy's `x-kv-router-instance` header says which engine served it, and the engine's
 * `usage.prompt_tokens_details.cached_tokens` what it actually reused. After each request the demo
 * waits until the router's view shows the prompt resident, so the next decision can use it: the
 * second round lands every prompt on the engine that holds it, with non-zero hits.
 */
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';

/** Must match router-svc/proxy/upstream-forwarder.ts INSTANCE_HEADER (the two never import each other). */
const INSTANCE_HEADER = 'x-kv-router-instance';
const QUERY_PATH = '/v1/internal/kv-cache/query';
const PROMPTS = 3;
const ROUNDS = 2;
/** Generous: on a loaded machine an event crosses engine → directory → router in well under this. */
const VIEW_WAIT_MS = 30000;

export interface DemoOptions {
  readonly routerUrl: string;
  /** The model every request names (the fleet serves several, cache-identity §2). */
  readonly model: string;
  readonly blockSize: number;
  readonly internalApiToken: string;
  /** Streams the directory should serve (DEFAULT, PREFILL and MIX ranks). */
  readonly expectedStreams: number;
  readonly print: (line: string) => void;
}

export interface DemoRequest {
  readonly round: number;
  readonly prompt: number;
  readonly engine: string;
  readonly inputTokens: number;
  /** The router's view of the serving engine before the request: min over its ranks of device + host-only hits. */
  readonly hitTokens: number;
  /** What the engine reported reusing. */
  readonly cachedTokens: number;
}

export async function runDemo(opts: DemoOptions): Promise<DemoRequest[]> {
  const client = new RouterClient(opts.routerUrl, opts.internalApiToken, opts.model);
  opts.print(`[demo] waiting for the router's view to list ${opts.expectedStreams} synchronized engine streams`);
  await waitFor(async () => {
    const q = await client.query([]);
    return q.matches.length >= opts.expectedStreams && q.matches.every((m) => m.synchronized);
  }, `${opts.expectedStreams} synchronized streams in the router's query endpoint`);

  const prompts = demoPrompts(opts.blockSize);
  const results: DemoRequest[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (let i = 0; i < prompts.length; i++) {
      const tokens = prompts[i]!;
      // The demo's requests never overlap, so a candidate with a queue in the view only shows a
      // heartbeat sent mid-request; wait for the next one, or CAR rightly avoids that engine.
      await waitFor(async () => (await client.route(tokens)).candidates.every((c) => c.queue_cost === 0), 'every engine idle in the router view');
      const before = await client.query(tokens);
      const served = await client.complete(tokens);
      const r: DemoRequest = {
        round,
        prompt: i + 1,
        engine: served.engine,
        inputTokens: tokens.length,
        hitTokens: instanceHit(before.matches, served.engine),
        cachedTokens: served.cachedTokens,
      };
      results.push(r);
      opts.print(
        `  round ${r.round}  prompt ${r.prompt}  -> ${r.engine.padEnd(21)} tokens ${String(r.inputTokens).padStart(4)}  hit ${String(r.hitTokens).padStart(4)} (router view)  cached ${String(r.cachedTokens).padStart(4)} (engine)`,
      );
      // The engine published the prompt's blocks; wait until the router sees them so the next
      // decision (this round's shared prefix, next round's whole prompt) can use them.
      const resident = Math.floor(tokens.length / opts.blockSize) * opts.blockSize;
      // One rank holding it is enough here: a DP engine's other ranks never saw the prompt.
      await waitFor(async () => bestRankHit((await client.query(tokens)).matches, served.engine) >= resident, `prompt ${i + 1} resident on ${served.engine} in the router's view`);
    }
  }
  return results;
}

/** One turn of the chat demo. */
export interface ChatDemoTurn {
  readonly turn: number;
  readonly engine: string;
  /** What the router tokenized the chat to, and from where (tokenization.md §2). */
  readonly inputTokens: number;
  readonly tokenSource: string;
  /** The router's credit for the serving engine before the turn (its `/v1/route` explanation). */
  readonly hitTokens: number;
  readonly cachedTokens: number;
}

/** Every demo chat starts with it, whatever its model: a prefix only the same identity may reuse. */
export const CHAT_SYSTEM = 'You are the demo assistant of a KV-cache-aware router. Keep answers short and precise.';
const CHAT_QUESTIONS = ['What does the router do with a chat request?', 'And on the second turn?', 'How can I check it?'];

export interface ChatDemoOptions extends DemoOptions {
  /** The user turns, one request each (default: three questions about the router). */
  readonly questions?: readonly string[];
  /** How each turn's line starts (default `chat turn N`). */
  readonly label?: (turn: number) => string;
}

/**
 * A chat of several turns through `/v1/chat/completions` (text, not token ids): the router
 * tokenizes it with the model's chat template (its `--models_file` entry), and each turn resends
 * the history, so turn n+1 is credited with turn n's prefix on the engine that served turn n.
 */
export async function runChatDemo(opts: ChatDemoOptions): Promise<ChatDemoTurn[]> {
  const client = new RouterClient(opts.routerUrl, opts.internalApiToken, opts.model);
  const questions = opts.questions ?? CHAT_QUESTIONS;
  const label = opts.label ?? ((turn: number): string => `chat turn ${turn}`);
  const messages: { role: string; content: string }[] = [{ role: 'system', content: CHAT_SYSTEM }];
  const turns: ChatDemoTurn[] = [];
  for (let t = 0; t < questions.length; t++) {
    messages.push({ role: 'user', content: questions[t]! });
    await waitFor(async () => (await client.routeBody({ messages })).candidates.every((c) => c.queue_cost === 0), 'every engine idle in the router view');
    const before = await client.routeBody({ messages });
    const served = await client.chat(messages);
    const hit = before.candidates.find((c) => c.role === 'prefill' && c.instance_name === served.engine)?.hit_tokens ?? 0;
    const turn: ChatDemoTurn = { turn: t + 1, engine: served.engine, inputTokens: before.input_tokens, tokenSource: before.token_source, hitTokens: hit, cachedTokens: served.cachedTokens };
    turns.push(turn);
    opts.print(
      `  ${label(turn.turn)}  -> ${turn.engine.padEnd(21)} tokens ${String(turn.inputTokens).padStart(4)} (${turn.tokenSource})  hit ${String(turn.hitTokens).padStart(4)} (router view)  cached ${String(turn.cachedTokens).padStart(4)} (engine)`,
    );
    if (before.token_source !== 'tokenizer') opts.print(`    not tokenized: ${before.reason ?? '(no reason)'}`);
    // Until the router sees this turn resident on its engine, so the next turn can be credited.
    const resident = Math.floor(before.input_tokens / opts.blockSize) * opts.blockSize;
    await waitFor(
      async () => ((await client.routeBody({ messages })).candidates.find((c) => c.role === 'prefill' && c.instance_name === served.engine)?.hit_tokens ?? 0) >= resident,
      `chat turn ${t + 1} resident on ${served.engine} in the router's view`,
    );
    messages.push({ role: 'assistant', content: served.text });
  }
  return turns;
}

/** One `/v1/route` answer for the first prompt, for the summary (no request is sent to an engine). */
export async function routeExample(opts: Pick<DemoOptions, 'routerUrl' | 'model' | 'blockSize' | 'internalApiToken'>): Promise<RouteAnswer> {
  return new RouterClient(opts.routerUrl, opts.internalApiToken, opts.model).route(demoPrompts(opts.blockSize)[0]!);
}

/**
 * A 3-block "system prompt" shared by every prompt, then a per-prompt user part of one and a half
 * blocks (the half block is never resident: hits count complete blocks only).
 */
export function demoPrompts(blockSize: number): number[][] {
  const system = Array.from({ length: 3 * blockSize }, (_, k) => 1 + k);
  const userLength = blockSize + Math.max(1, Math.floor(blockSize / 2));
  return Array.from({ length: PROMPTS }, (_, i) => [...system, ...Array.from({ length: userLength }, (_, k) => 10000 * (i + 1) + k)]);
}

/** routing.md CAR hit of one instance (host weight aside): the minimum over its ranks. */
function instanceHit(matches: readonly StreamMatch[], instance: string): number {
  let hit = Number.POSITIVE_INFINITY;
  for (const m of matches) {
    if (m.instance_name !== instance) continue;
    hit = Math.min(hit, m.synchronized ? m.device_hit_tokens + m.host_only_hit_tokens : 0);
  }
  return Number.isFinite(hit) ? hit : 0;
}

/** The most any one rank of the instance holds. */
function bestRankHit(matches: readonly StreamMatch[], instance: string): number {
  let hit = 0;
  for (const m of matches) {
    if (m.instance_name === instance && m.synchronized) hit = Math.max(hit, m.device_hit_tokens + m.host_only_hit_tokens);
  }
  return hit;
}

/** The part of a `POST /v1/route` answer the demo reads (routing.md "POST /v1/route", cache-identity §2). */
export interface RouteAnswer {
  readonly prefill: { readonly name: string };
  readonly input_tokens: number;
  readonly token_source: string;
  readonly reason?: string;
  readonly decode: { readonly name: string } | null;
  readonly identity: { readonly model: string | null; readonly lora_name: string | null; readonly salted: boolean };
  readonly excluded_for_model: readonly { readonly instance_name: string; readonly models: readonly string[] }[];
  readonly candidates: readonly {
    readonly instance_name: string;
    readonly role: string;
    readonly hit_tokens: number;
    readonly kv_hit_ratio: number;
    readonly queue_cost: number;
    readonly score: number;
  }[];
}

/** The router's endpoints the demo calls; every body names `model`. */
export class RouterClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
    readonly model: string,
  ) {}

  async query(tokenIds: readonly number[]): Promise<QueryResult> {
    return (await this.post(QUERY_PATH, { model: this.model, token_ids: tokenIds }, true)).json as QueryResult;
  }

  async route(tokenIds: readonly number[]): Promise<RouteAnswer> {
    return this.routeBody({ token_ids: tokenIds });
  }

  async routeBody(body: object): Promise<RouteAnswer> {
    // A dry run: nothing is sent to an engine, so it must not count as in-flight load.
    return (await this.post('/v1/route', { model: this.model, ...body, dry_run: true }, true)).json as RouteAnswer;
  }

  /** `GET /v1/models`: the routing candidates' models, adapters with their parent. */
  async models(): Promise<{ id: string; parent: string | null }[]> {
    const res = await fetch(`${this.baseUrl}/v1/models`, { signal: AbortSignal.timeout(10000) });
    if (res.status !== 200) throw new Error(`GET /v1/models answered ${res.status}`);
    return ((await res.json()) as { data: { id: string; parent: string | null }[] }).data;
  }

  async chat(messages: readonly { role: string; content: string }[]): Promise<{ engine: string; cachedTokens: number; text: string }> {
    const res = await this.post('/v1/chat/completions', { model: this.model, messages, max_tokens: 8 }, false);
    const answer = res.json as { choices?: { message?: { content?: unknown } }[] };
    const text = answer.choices?.[0]?.message?.content;
    return { ...servedBy(res), text: typeof text === 'string' ? text : '' };
  }

  async complete(tokenIds: readonly number[]): Promise<{ engine: string; cachedTokens: number }> {
    return servedBy(await this.post('/v1/completions', { model: this.model, prompt: tokenIds, max_tokens: 4 }, false));
  }

  private async post(path: string, body: unknown, internal: boolean): Promise<{ json: unknown; headers: Headers }> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (internal && this.token !== '') headers['x-internal-token'] = this.token;
    const res = await fetch(`${this.baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(10000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`POST ${path} answered ${res.status}: ${text.slice(0, 300)}`);
    return { json: JSON.parse(text) as unknown, headers: res.headers };
  }
}

/** The proxy's instance header and the engine's reported prompt-cache reuse. */
function servedBy(res: { json: unknown; headers: Headers }): { engine: string; cachedTokens: number } {
  const engine = res.headers.get(INSTANCE_HEADER) ?? '(unknown)';
  const usage = (res.json as { usage?: { prompt_tokens_details?: { cached_tokens?: unknown } } }).usage;
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  return { engine, cachedTokens: typeof cached === 'number' ? cached : 0 };
}

export async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + VIEW_WAIT_MS;
  let lastError = '';
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      lastError = e instanceof Error ? e.message : String(e);
    }
    if (performance.now() > deadline) throw new Error(`demo: no ${what} within ${VIEW_WAIT_MS} ms${lastError === '' ? '' : ` (last error: ${lastError})`}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
