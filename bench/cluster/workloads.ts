/**
 * The cluster benchmark's two seeded workloads, built whole before any timing: sessions of
 * requests, each session a closed-loop client (it sends its next request only after the previous
 * answer arrived and a think time passed), so a turn always extends a prompt the cluster has seen.
 *
 *  - `multi_turn`: chat. Users share a few system prompts; turn t's prompt is the system prompt,
 *    every earlier user message and assistant reply, and the new user message, so each turn
 *    appends to the user's conversation. Think time between turns ~ Exp(mean thinkMs).
 *  - `agentic`: agents. A few tasks each have a long shared context (tool schemas, repository
 *    files); many branches per task each add a goal and then, step by step, an observation and an
 *    action (a tree of prompts with long shared prefixes). Tool time between steps ~ Exp(mean).
 *
 * Token ids are drawn from disjoint ranges per part so unrelated prompts never share a block.
 */
import { seededRandom } from '../lib/seeded-random.js';

export type WorkloadName = 'multi_turn' | 'agentic';

export interface SessionRequest {
  readonly tokenIds: readonly number[];
  /** `{"prompt":[...],"max_tokens":1}`: the body sent, serialized before timing. */
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

function uniformInt(rand: () => number, [lo, hi]: readonly [number, number]): number {
  return lo + Math.floor(rand() * (hi - lo + 1));
}

function exponential(rand: () => number, mean: number): number {
  return -Math.log(1 - rand()) * mean;
}

function request(tokenIds: number[], delayMs: number): SessionRequest {
  return { tokenIds, body: JSON.stringify({ prompt: tokenIds, max_tokens: 1 }), delayMs };
}

function finish(name: WorkloadName, sessions: SessionRequest[][], blockSize: number, shape: Record<string, number>): Workload {
  // Working set: distinct blocks. Every token id is drawn once, so a block's first token names it.
  const blocks = new Set<number>();
  let requests = 0;
  let promptTokens = 0;
  for (const s of sessions) {
    for (const r of s) {
      requests++;
      promptTokens += r.tokenIds.length;
      const n = Math.floor(r.tokenIds.length / blockSize);
      for (let b = 0; b < n; b++) blocks.add(r.tokenIds[b * blockSize]!);
    }
  }
  return { name, sessions, requests, promptTokens, workingSetBlocks: blocks.size, shape };
}

export function buildMultiTurn(seed: number, blockSize: number, s: MultiTurnShape): Workload {
  const rand = seededRandom(seed);
  const tokens = new TokenSource();
  const systems: number[][] = [];
  for (let i = 0; i < s.systemPrompts; i++) systems.push(tokens.take(s.systemPromptTokens));
  const sessions: SessionRequest[][] = [];
  for (let u = 0; u < s.users; u++) {
    const conversation = [...systems[u % s.systemPrompts]!];
    const session: SessionRequest[] = [];
    for (let t = 0; t < s.turns; t++) {
      if (t > 0) conversation.push(...tokens.take(uniformInt(rand, s.messageTokens))); // the previous reply
      conversation.push(...tokens.take(uniformInt(rand, s.messageTokens))); // the user's message
      session.push(request([...conversation], t === 0 ? rand() * s.rampMs : exponential(rand, s.thinkMs)));
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
