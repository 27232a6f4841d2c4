/**
 * The simulated engine's OpenAI-compatible API (routing.md "OpenAI-compatible proxy" is its
 * client): `POST /v1/completions` and `POST /v1/chat/completions` on the instance's business HTTP
 * port (the port in its instance name), plus `GET /health` when it runs its own server.
 *
 * Each request is a prefill first: the prompt's tokens are admitted into one rank's BlockPool
 * (`EngineSimulator.admitPrompt`), so a routed prompt becomes resident and is published as KV
 * events, exactly what CAR later credits. A token-array `prompt` is used as is. With a tokenizer
 * (`--tokenizer`), text and chat are tokenized by the router's own shared code
 * (shared/tokenize/prompt-tokenizer.ts: completions with special tokens, chats through the chat
 * template), so a routed chat becomes resident as a real engine's blocks would; a template that
 * fails is a 400, as vLLM answers. Without one, or for content it cannot tokenize (images), text is
 * one token per UTF-8 byte. The completion is a few
 * fixed words, one "token" every `tokenIntervalMs`; with `"stream": true` each token is one SSE
 * chunk and the stream ends with `data: [DONE]`. A client that goes away mid-request is noticed
 * (`aborted`, the 'abort' event) and generation stops, which is how tests see a router cancel.
 *
 * `usage.prompt_tokens_details.cached_tokens` (the OpenAI field for prompt cache hits) reports the
 * prefix the rank already held, so a test can see that routing found the cache.
 *
 * Option `prefill` (off by default) puts a PrefillQueue (prefill-cost-model.ts) in front of the
 * admission: requests wait their turn, the prefill takes time by the uncached tokens, and the
 * answer's headers carry the engine's own TTFT (`x-sim-ttft-ms`, see PREFILL_TIMING_HEADERS).
 *
 * Served models (cache-identity §6): `GET /v1/models` and vLLM's LoRA load/unload routes come from
 * `models-route.ts` over the endpoint's ServedModelRegistry. A request's `model` picks the base
 * model or a loaded adapter (a LoRA request: every block keyed by the adapter), or is vLLM's 404
 * when the registry is strict; `cache_salt` (a non-empty string, else vLLM's 400) salts the first
 * block. Both go to the prefill as the request's cache identity.
 *
 * One HTTP server per simulated engine: with EngineControl, pass this as its `httpRoutes`; alone,
 * `OpenAiServer.listen` serves these routes and /health.
 */
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { firstInvalidTokenId } from '../../shared/keys/token-ids.js';
import { silentLogger, type Logger } from '../../shared/log/logger.js';
import { parseChatRequest, PromptShapeError } from '../../shared/tokenize/chat-request.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { prefillTimingHeaders, type PrefillQueue } from './prefill-cost-model.js';
import type { AdmitOptions } from './block-pool.js';
import { ModelsRoute } from './models-route.js';
import { DEFAULT_BASE_MODEL, ServedModelRegistry } from './served-model-registry.js';
import { sendModelNotFound, sendVllmError } from './vllm-error.js';

/** What the endpoint needs from the engine: a prefill on some rank (EngineSimulator has it). */
export interface PromptAdmitter {
  readonly blockSize: number;
  /** `identity`: the request's LoRA adapter and cache salt (absent = base model, unsalted). */
  admitPrompt(tokenIds: readonly number[], identity?: AdmitOptions): Promise<{ hitBlocks: number; hostHitBlocks: number }>;
  /** vLLM's `POST /reset_prefix_cache`: every rank publishes `[AllBlocksCleared]` (a full-state batch). */
  resetPrefixCache?(): Promise<void>;
}

/** vLLM's route that empties the prefix cache (how an operator clears `history_lost`, engines.md §3). */
export const RESET_PREFIX_CACHE_PATH = '/reset_prefix_cache';

export interface OpenAiEndpointOptions {
  /** null: answer without touching any cache (no prefill side effects). */
  readonly engine: PromptAdmitter | null;
  /** Base model of the default (lenient) registry when `models` is absent; default `sim`. */
  readonly model?: string;
  /** What the engine serves (`/v1/models`, LoRA routes, 404s); default: `model` alone, lenient. */
  readonly models?: ServedModelRegistry;
  /** Delay before each generated token; default 1 ms. Tests raise it to keep a stream open. */
  readonly tokenIntervalMs?: number;
  /** FIFO prefill queue with a cost model; absent or null: admitted at once, no delay. */
  readonly prefill?: PrefillQueue | null;
  /** The model's tokenizer (`--tokenizer`); absent or null: text is one token per UTF-8 byte. */
  readonly tokenizer?: PromptTokenizer | null;
  /** Largest request body; default 8 MiB (the router's own limit). */
  readonly maxBodyBytes?: number;
  /** vllm/sglang: the `GET /kv_event_sources` answer (engines.md §6); absent or null: the route is not served. */
  readonly kvEventSources?: (() => readonly WireKvEventSource[]) | null;
  readonly logger?: Logger;
}

/** Emitted per request as `'request'`, `'complete'` and `'abort'`. */
export interface SimRequestEvent {
  readonly id: string;
  readonly path: string;
  readonly stream: boolean;
  readonly promptTokens: number;
  /** The request body exactly as received (tests check a proxy forwarded it unchanged). */
  readonly body: Buffer;
}

/** vLLM's KV event discovery route (its PR 55844; engines.md §6). */
export const KV_EVENT_SOURCES_PATH = '/kv_event_sources';

/** One element of vLLM's `GET /kv_event_sources` answer (a bare JSON array, one per DP rank). */
export interface WireKvEventSource {
  readonly data_parallel_rank: number;
  readonly endpoint: string;
  readonly replay_endpoint: string | null;
  readonly topic: string;
}

/**
 * The answer a vLLM started with `"endpoint": "tcp://*:5557"` gives: each rank's bind endpoint
 * with the wildcard host it was configured with (the consumer puts the engine's address in).
 */
export function kvEventSourcesAnswer(eventEndpoints: readonly string[], replayEndpoints: readonly string[], topic: string): WireKvEventSource[] {
  const wildcard = (ep: string): string => ep.replace(/^tcp:\/\/[^/]+:(\d+)$/, 'tcp://*:$1');
  return eventEndpoints.map((ep, r) => ({
    data_parallel_rank: r,
    endpoint: wildcard(ep),
    replay_endpoint: replayEndpoints[r] === undefined || replayEndpoints[r] === '' ? null : wildcard(replayEndpoints[r]!),
    topic,
  }));
}

export const COMPLETIONS_PATH = '/v1/completions';
export const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';
const DEFAULT_MAX_TOKENS = 16;
/** Bound on generated tokens, so a careless `max_tokens` cannot keep a test busy for minutes. */
const MAX_TOKENS_CAP = 4096;
const WORDS = ['the', ' cache', ' was', ' warm', ' and', ' the', ' answer', ' came', ' quickly', '.'];

class BadRequest extends Error {}

export class OpenAiEndpoint extends EventEmitter {
  private readonly log: Logger;
  private readonly intervalMs: number;
  readonly models: ServedModelRegistry;
  private readonly modelsRoute: ModelsRoute;
  private seq = 0;
  /** Requests accepted (valid JSON on a known path). */
  requests = 0;
  completed = 0;
  /** Requests whose client went away before the answer ended. */
  aborted = 0;
  /** Requests refused with vLLM's 404 for a model this engine does not serve (a router sent it to the wrong engine). */
  modelNotFound = 0;

  constructor(private readonly opts: OpenAiEndpointOptions) {
    super();
    this.log = opts.logger ?? silentLogger;
    this.intervalMs = opts.tokenIntervalMs ?? 1;
    this.models = opts.models ?? new ServedModelRegistry({ names: [opts.model ?? DEFAULT_BASE_MODEL], strict: false });
    this.modelsRoute = new ModelsRoute(this.models);
  }

  /** Answers the OpenAI paths (true) or leaves the request to the caller (false). */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.modelsRoute.handle(req, res)) return true;
    const path = (req.url ?? '').split('?', 1)[0]!;
    const sources = this.opts.kvEventSources ?? null;
    if (path === KV_EVENT_SOURCES_PATH && sources !== null) {
      if (req.method !== 'GET' && req.method !== 'HEAD') sendError(res, 405, 'method not allowed');
      else {
        const json = JSON.stringify(sources());
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(req.method === 'HEAD' ? undefined : json);
      }
      return true;
    }
    const engine = this.opts.engine;
    if (path === RESET_PREFIX_CACHE_PATH && engine?.resetPrefixCache !== undefined) {
      if (req.method !== 'POST') sendError(res, 405, 'method not allowed');
      else
        engine.resetPrefixCache().then(
          () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'),
          () => sendError(res, 500, 'engine error'),
        );
      return true;
    }
    if (path !== COMPLETIONS_PATH && path !== CHAT_COMPLETIONS_PATH) return false;
    if (req.method !== 'POST') {
      sendError(res, 405, 'method not allowed');
      return true;
    }
    void this.serve(req, res, path).catch((e: unknown) => {
      this.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'openai request failed');
      if (!res.headersSent) sendError(res, 500, 'engine error');
      else res.destroy();
    });
    return true;
  }

  private async serve(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const body = await readBody(req, this.opts.maxBodyBytes ?? 8 * 1024 * 1024);
    if (body === null) return sendError(res, 413, 'request body too large');
    let request: ParsedRequest;
    try {
      const o = parseBody(body);
      // vLLM checks the model and its fields before it tokenizes anything.
      const identity = requestIdentity(o, this.models);
      if (identity.kind === 'not_found') {
        this.modelNotFound++;
        return sendModelNotFound(res, identity.model);
      }
      if (identity.kind === 'bad_salt') return sendVllmError(res, 400, 'BadRequestError', "Parameter 'cache_salt' must be a non-empty string if provided.");
      request = await parseRequest(o, path === CHAT_COMPLETIONS_PATH, this.opts.tokenizer ?? null, identity);
    } catch (e) {
      if (e instanceof BadRequest) return sendError(res, 400, e.message);
      throw e;
    }
    const event: SimRequestEvent = { id: `cmpl-sim-${++this.seq}`, path, stream: request.stream, promptTokens: request.tokens.length, body };
    this.requests++;
    this.emit('request', event);

    let closedEarly = false;
    res.on('close', () => {
      if (res.writableFinished) return;
      closedEarly = true;
      this.aborted++;
      this.log.debug({ id: event.id }, 'client went away');
      this.emit('abort', event);
    });

    const engine = this.opts.engine;
    const queue = this.opts.prefill ?? null;
    const timing = engine !== null && queue !== null ? await queue.run(request.tokens.length, engine.blockSize, () => engine.admitPrompt(request.tokens, request.identity)) : null;
    const prefill = engine === null ? { hitBlocks: 0, hostHitBlocks: 0 } : timing !== null ? timing.admitted : await engine.admitPrompt(request.tokens, request.identity);
    const timingHeaders = timing === null ? {} : prefillTimingHeaders(timing);
    const cachedTokens = this.opts.engine === null ? 0 : (prefill.hitBlocks + prefill.hostHitBlocks) * this.opts.engine.blockSize;
    const created = Math.floor(Date.now() / 1000);
    const base = { id: event.id, created, model: request.model };
    const chat = path === CHAT_COMPLETIONS_PATH;

    if (request.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...timingHeaders });
      for (let i = 0; i < request.maxTokens; i++) {
        await delay(this.intervalMs);
        if (closedEarly) return;
        const last = i === request.maxTokens - 1;
        const text = WORDS[i % WORDS.length]!;
        const chunk = chat
          ? { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: text } : { content: text }, finish_reason: last ? 'length' : null }] }
          : { ...base, object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: last ? 'length' : null }] };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      }
      res.end('data: [DONE]\n\n');
    } else {
      let text = '';
      for (let i = 0; i < request.maxTokens; i++) {
        await delay(this.intervalMs);
        if (closedEarly) return;
        text += WORDS[i % WORDS.length]!;
      }
      const usage = {
        prompt_tokens: request.tokens.length,
        completion_tokens: request.maxTokens,
        total_tokens: request.tokens.length + request.maxTokens,
        prompt_tokens_details: { cached_tokens: cachedTokens },
      };
      const answer = chat
        ? { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }], usage }
        : { ...base, object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: 'length' }], usage };
      const json = JSON.stringify(answer);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...timingHeaders });
      res.end(json);
    }
    this.completed++;
    this.emit('complete', event);
  }
}

/** A standalone engine HTTP server (no EngineControl): the OpenAI routes plus `GET /health`. */
export class OpenAiServer {
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly endpoint: OpenAiEndpoint,
  ) {}

  /** `routes` (default: the endpoint itself) answer first; /health and 404 take the rest. */
  static async listen(opts: { port: number; host?: string; endpoint: OpenAiEndpoint; routes?: { handle(req: IncomingMessage, res: ServerResponse): boolean } }): Promise<OpenAiServer> {
    const routes = opts.routes ?? opts.endpoint;
    const server = createServer((req, res) => {
      if (routes.handle(req, res)) return;
      if (req.url === '/health' && (req.method === 'GET' || req.method === 'HEAD')) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
        return;
      }
      sendError(res, 404, 'not found');
    });
    const self = new OpenAiServer(server, opts.endpoint);
    server.on('connection', (s: Socket) => {
      self.sockets.add(s);
      s.once('close', () => self.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return self;
  }

  get port(): number {
    const addr = this.server.address();
    return typeof addr === 'object' && addr !== null ? addr.port : 0;
  }

  /** Stops listening and cuts open connections (a crashed engine, as far as clients can tell). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }
}

interface ParsedRequest {
  readonly tokens: readonly number[];
  readonly stream: boolean;
  readonly maxTokens: number;
  /** `model` of the answer: the adapter, the base model, or (lenient registry) the name asked for. */
  readonly model: string;
  readonly identity: AdmitOptions;
}

function parseBody(body: Buffer): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new BadRequest('body is not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new BadRequest('body must be a JSON object');
  return json as Record<string, unknown>;
}

type RequestIdentity =
  | { readonly kind: 'ok'; readonly answerModel: string; readonly admit: AdmitOptions }
  | { readonly kind: 'not_found'; readonly model: string }
  | { readonly kind: 'bad_salt' };

const BASE_UNSALTED: AdmitOptions = Object.freeze({});

/** cache-identity §6: the model picks base or LoRA; `cache_salt` (vLLM's field) salts block 0. */
function requestIdentity(o: Record<string, unknown>, models: ServedModelRegistry): RequestIdentity {
  const m = o['model'] ?? null;
  if (m !== null && typeof m !== 'string') throw new BadRequest('model must be a string');
  const salt = o['cache_salt'] ?? null;
  if (salt !== null && (typeof salt !== 'string' || salt === '')) return { kind: 'bad_salt' };
  const resolved = models.resolve(m);
  if (resolved.kind === 'not_found') return resolved;
  const lora = resolved.kind === 'lora' ? resolved.adapter : null;
  const admit = lora === null && salt === null ? BASE_UNSALTED : { loraName: lora?.name ?? null, loraId: lora?.id ?? null, cacheSalt: salt };
  return { kind: 'ok', answerModel: resolved.answerModel, admit };
}

async function parseRequest(o: Record<string, unknown>, chat: boolean, tokenizer: PromptTokenizer | null, identity: RequestIdentity & { kind: 'ok' }): Promise<ParsedRequest> {
  const tokens = tokenizer === null ? (chat ? chatTokens(o['messages']) : promptTokens(o['prompt'])) : await modelTokens(o, chat, tokenizer);
  const stream = o['stream'] === true;
  const mt = o['max_tokens'] ?? o['max_completion_tokens'];
  let maxTokens = DEFAULT_MAX_TOKENS;
  if (mt !== undefined && mt !== null) {
    if (typeof mt !== 'number' || !Number.isInteger(mt) || mt < 1) throw new BadRequest('max_tokens must be a positive integer');
    maxTokens = Math.min(mt, MAX_TOKENS_CAP);
  }
  return { tokens, stream, maxTokens, model: identity.answerModel, identity: identity.admit };
}

/** The request's ids as the model's tokenizer gives them (the same code the router runs). */
async function modelTokens(o: Record<string, unknown>, chat: boolean, tokenizer: PromptTokenizer): Promise<readonly number[]> {
  if (!chat) {
    const prompt = Array.isArray(o['prompt']) && typeof o['prompt'][0] === 'string' ? o['prompt'][0] : o['prompt'];
    if (typeof prompt !== 'string') return promptTokens(prompt);
    const outcome = await tokenizer.completion(prompt, o['add_special_tokens'] !== false);
    return outcome.ok ? outcome.tokenIds : promptTokens(prompt);
  }
  let request;
  try {
    request = parseChatRequest(o);
  } catch (e) {
    if (e instanceof PromptShapeError) throw new BadRequest(e.message);
    throw e;
  }
  const outcome = await tokenizer.chat(request);
  if (outcome.ok) return outcome.tokenIds;
  if (outcome.reason === 'template_error') throw new BadRequest(outcome.detail);
  return chatTokens(o['messages']);
}

/** A token-id array as is; text one token per UTF-8 byte; a batch (array of prompts) by its first. */
function promptTokens(prompt: unknown): number[] {
  if (typeof prompt === 'string') return [...Buffer.from(prompt, 'utf8')];
  if (Array.isArray(prompt)) {
    if (prompt.length === 0) return [];
    if (firstInvalidTokenId(prompt) < 0) return prompt as number[];
    return promptTokens(prompt[0]);
  }
  throw new BadRequest('prompt must be a string or an array of token ids');
}

function chatTokens(messages: unknown): number[] {
  if (!Array.isArray(messages)) throw new BadRequest('messages must be an array');
  let text = '';
  for (const m of messages) {
    if (typeof m !== 'object' || m === null) throw new BadRequest('messages[] must be objects');
    const role = (m as Record<string, unknown>)['role'];
    const content = (m as Record<string, unknown>)['content'];
    text += `${typeof role === 'string' ? role : ''}: ${typeof content === 'string' ? content : JSON.stringify(content ?? '')}\n`;
  }
  return [...Buffer.from(text, 'utf8')];
}

/** The whole body, or null when it exceeds `max` (the rest is drained, not kept). */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total <= max) chunks.push(chunk);
  }
  return total > max ? null : Buffer.concat(chunks, total);
}

function sendError(res: ServerResponse, status: number, message: string): void {
  const json = JSON.stringify({ error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error' } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
