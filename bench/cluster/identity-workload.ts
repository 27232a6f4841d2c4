/**
 * The cluster benchmark's mixed-identity workload (issue 26; cache-identity §1–§6): one fleet
 * serving two base models, a LoRA adapter of the first and two salted tenants of the first, with
 * multi-turn sessions as real OpenAI clients send them (`model`, and `cache_salt` for a tenant).
 *
 *   identity        model      salt      path                 engines that serve it (FLEET)
 *   qwen3           qwen3      -         /v1/chat/completions the 5 qwen3 engines
 *   sql-lora        sql-lora   -         /v1/completions      the 2 of them that load the adapter
 *   qwen3/tenant-a  qwen3      tenant-a  /v1/chat/completions the 5 qwen3 engines
 *   qwen3/tenant-b  qwen3      tenant-b  /v1/chat/completions the 5 qwen3 engines
 *   llama-3.1       llama-3.1  -         /v1/chat/completions the 3 llama-3.1 engines
 *
 * Every identity's users draw their system prompt from the SAME few texts, so the four Qwen3
 * identities send the same tokens for it: only the identity tells their blocks apart, and a router
 * crediting one identity's blocks to another would send a request where the engine finds no hit
 * (its own accounting shows it). Llama's tokenizer gives the same texts other ids.
 *
 * Session u of every identity has system prompt u mod systemPrompts; turn t is the system prompt,
 * every earlier user message and reply, and the new message (as workloads.ts `multi_turn`). The
 * adapter's clients send the same conversation as one text `prompt` (completions, as SQL-generation
 * clients do). Token ids (for the ORACLE) come from the model's tokenizer through the code the
 * router and the engines run. Seeded; bodies serialized before any timing.
 */
import { parseChatRequest } from '../../shared/tokenize/chat-request.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { seededRandom } from '../lib/seeded-random.js';
import type { RequestIdentity } from './oracle-identity.js';
import { exponential, uniformInt, words, workingSetBlocks, type MultiTurnShape, type SessionRequest } from './workloads.js';

export const QWEN = 'qwen3';
export const LORA = 'sql-lora';
export const LLAMA = 'llama-3.1';

/** One cache identity of the workload: what its requests say, and whose engines and tokenizer serve it. */
export interface WorkloadIdentity extends RequestIdentity {
  /** Its name on result lines. */
  readonly label: string;
  readonly model: string;
  /** The base model (an adapter's parent): its engines' group and its tokenizer. */
  readonly baseModel: string;
  /** `/v1/chat/completions` (messages) or `/v1/completions` (one text prompt). */
  readonly path: '/v1/chat/completions' | '/v1/completions';
}

export const IDENTITIES: readonly WorkloadIdentity[] = [
  { label: QWEN, model: QWEN, baseModel: QWEN, cacheSalt: null, path: '/v1/chat/completions' },
  { label: LORA, model: LORA, baseModel: QWEN, cacheSalt: null, path: '/v1/completions' },
  { label: `${QWEN}/tenant-a`, model: QWEN, baseModel: QWEN, cacheSalt: 'tenant-a', path: '/v1/chat/completions' },
  { label: `${QWEN}/tenant-b`, model: QWEN, baseModel: QWEN, cacheSalt: 'tenant-b', path: '/v1/chat/completions' },
  { label: LLAMA, model: LLAMA, baseModel: LLAMA, cacheSalt: null, path: '/v1/chat/completions' },
];

/** Engines of one kind: what each serves (base first, then adapters: `--served_models`) and how many. */
export interface EngineGroup {
  readonly servedModels: readonly string[];
  readonly engines: number;
}

/** 8 engines split 5/3 between the base models; the adapter loaded on 2 of the 5. */
export const FLEET: readonly EngineGroup[] = [
  { servedModels: [QWEN, LORA], engines: 2 },
  { servedModels: [QWEN], engines: 3 },
  { servedModels: [LLAMA], engines: 3 },
];

/** workloads.ts `multi_turn`'s shape, its users counted per identity. */
export interface IdentityShape extends Omit<MultiTurnShape, 'users'> {
  readonly usersPerIdentity: number;
}

export interface IdentityWorkload {
  readonly sessions: readonly (readonly SessionRequest[])[];
  /** Index into IDENTITIES of each session. */
  readonly identityOf: readonly number[];
  readonly requests: number;
  readonly promptTokens: number;
  /**
   * Distinct complete blocks per base model, summed over its identities (blocks of two identities
   * are never the same block, whatever their tokens): what its engines would need to hold it all.
   */
  readonly workingSetBlocks: ReadonlyMap<string, number>;
}

/** The tokenizer of a base model (the one its engines and the routers' `--models_file` entry use). */
export type TokenizerOf = (baseModel: string) => PromptTokenizer;

type Message = { readonly role: string; readonly content: string };

/** One turn's body as a client sends it, and its ids as the router and the engine compute them. */
export async function identityRequest(identity: WorkloadIdentity, tokenizer: PromptTokenizer, messages: readonly Message[], delayMs: number): Promise<SessionRequest> {
  const salt = identity.cacheSalt === null ? {} : { cache_salt: identity.cacheSalt };
  if (identity.path === '/v1/completions') {
    const prompt = messages.map((m) => m.content).join('\n');
    const outcome = await tokenizer.completion(prompt);
    if (!outcome.ok) throw new Error(`${identity.label}: prompt not tokenized (${outcome.detail})`);
    return { tokenIds: outcome.tokenIds, path: identity.path, body: JSON.stringify({ model: identity.model, prompt, max_tokens: 1, ...salt }), delayMs };
  }
  const body = JSON.stringify({ model: identity.model, messages, max_tokens: 1, ...salt });
  const outcome = await tokenizer.chat(parseChatRequest(JSON.parse(body) as Record<string, unknown>));
  if (!outcome.ok) throw new Error(`${identity.label}: chat not tokenized (${outcome.detail})`);
  return { tokenIds: outcome.tokenIds, path: identity.path, body, delayMs };
}

export async function buildIdentityWorkload(seed: number, blockSize: number, s: IdentityShape, tokenizerOf: TokenizerOf): Promise<IdentityWorkload> {
  const rand = seededRandom(seed);
  const systems: string[] = [];
  for (let i = 0; i < s.systemPrompts; i++) systems.push(`System prompt ${i}: ${words(rand, s.systemPromptTokens)}`);
  const sessions: SessionRequest[][] = [];
  const identityOf: number[] = [];
  // Users of every identity interleaved, so each identity's sessions spread over the ramp alike.
  for (let u = 0; u < s.usersPerIdentity; u++) {
    for (let k = 0; k < IDENTITIES.length; k++) {
      const identity = IDENTITIES[k]!;
      const tokenizer = tokenizerOf(identity.baseModel);
      const conversation: Message[] = [{ role: 'system', content: systems[u % s.systemPrompts]! }];
      const session: SessionRequest[] = [];
      for (let t = 0; t < s.turns; t++) {
        if (t > 0) conversation.push({ role: 'assistant', content: words(rand, uniformInt(rand, s.messageTokens)) });
        conversation.push({ role: 'user', content: `User ${u}: ${words(rand, uniformInt(rand, s.messageTokens))}` });
        session.push(await identityRequest(identity, tokenizer, conversation, t === 0 ? rand() * s.rampMs : exponential(rand, s.thinkMs)));
      }
      sessions.push(session);
      identityOf.push(k);
    }
  }
  let requests = 0;
  let promptTokens = 0;
  for (const session of sessions) {
    requests += session.length;
    for (const r of session) promptTokens += r.tokenIds.length;
  }
  const perModel = new Map<string, number>();
  IDENTITIES.forEach((identity, k) => {
    const own = sessions.filter((_, i) => identityOf[i] === k);
    perModel.set(identity.baseModel, (perModel.get(identity.baseModel) ?? 0) + workingSetBlocks(own, blockSize));
  });
  return { sessions, identityOf, requests, promptTokens, workingSetBlocks: perModel };
}
