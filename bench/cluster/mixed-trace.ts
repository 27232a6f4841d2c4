/**
 * The cluster benchmark's mixed-length workload, generated (seeded) in Mooncake's trace format
 * (mooncake-trace.ts), so it replays through the same path as a published trace and needs no
 * download. `--write_trace=FILE` of cluster.bench.ts writes it out as JSON Lines.
 *
 * What it follows: the input lengths of Mooncake's conversation trace (FAST25-release/traces/
 * conversation_trace.jsonl). 151 of its lines, read at two places of the file (its start and
 * 1.5 MB in), have mean 10,860 tokens, median 6,760, p90 26,156, p99 66,240, max 87,169 (the
 * paper reports a mean of about 12k over the whole trace); their logarithm has mean 8.68 and
 * standard deviation 1.17, and every prompt starts with the same block (hash id 0), the shortest
 * being ~890 tokens. Output lengths there have a median near 350.
 *
 * How: arrivals are Poisson; each request draws its input length from that log-normal (clipped to
 * [MIN_INPUT, MAX_INPUT]), and with probability `continueShare` continues an earlier conversation
 * — of those whose last turn came at least `minTurnGapMs` before and whose context (that turn's
 * input and output) is shorter than the new length, the longest — so its hash ids start with that context's complete
 * blocks, as a chat's next turn does; otherwise it starts a conversation of its own after the
 * shared block 0. The lengths' distribution is the target's by construction; prefix reuse comes
 * from the continuations (TraceStats.prefixReuse measures it).
 */
import { MOONCAKE_BLOCK_TOKENS, type TraceRecord } from './mooncake-trace.js';
import { seededRandom } from '../lib/seeded-random.js';

/** The conversation trace's input lengths: log-normal, ln tokens ~ N(8.68, 1.17²) (see the header). */
export const CONVERSATION_INPUT = Object.freeze({ logMean: 8.68, logSd: 1.17 });
/** Output lengths: ln tokens ~ N(5.7, 0.9²), median ~300, mean ~450. */
export const CONVERSATION_OUTPUT = Object.freeze({ logMean: 5.7, logSd: 0.9 });
/** The shortest prompt of the trace is the shared block and a short message. */
export const MIN_INPUT = 890;
/** A 128k-token context window. */
export const MAX_INPUT = 131_072;

export interface MixedTraceShape {
  readonly requests: number;
  /** Mean arrivals per second (trace time; the replay scales it). */
  readonly ratePerS: number;
  /** Share of requests that continue an earlier conversation when one fits. */
  readonly continueShare: number;
  /** A conversation's next turn comes at least this long after its previous one (trace time). */
  readonly minTurnGapMs: number;
}

interface Conversation {
  /** Hash ids of its context's complete blocks. */
  ids: number[];
  contextTokens: number;
  lastAtMs: number;
}

/** Conversations kept open for continuation (the most recent ones). */
const OPEN_CONVERSATIONS = 512;

function normal(rand: () => number): number {
  // Box–Muller; 1 − u keeps the logarithm finite.
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

export function generateMixedTrace(seed: number, s: MixedTraceShape): TraceRecord[] {
  if (!(s.requests >= 1 && s.ratePerS > 0 && s.continueShare >= 0 && s.continueShare <= 1 && s.minTurnGapMs >= 0)) throw new RangeError(`bad mixed trace shape ${JSON.stringify(s)}`);
  const rand = seededRandom(seed);
  let nextId = 1;
  const fresh = (n: number): number[] => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(nextId++);
    return out;
  };
  const open: Conversation[] = [];
  const out: TraceRecord[] = [];
  let t = 0;
  for (let k = 0; k < s.requests; k++) {
    if (k > 0) t += (-Math.log(1 - rand()) / s.ratePerS) * 1000;
    const at = Math.round(t);
    const input = Math.min(MAX_INPUT, Math.max(MIN_INPUT, Math.round(Math.exp(CONVERSATION_INPUT.logMean + CONVERSATION_INPUT.logSd * normal(rand)))));
    const output = Math.max(1, Math.min(4096, Math.round(Math.exp(CONVERSATION_OUTPUT.logMean + CONVERSATION_OUTPUT.logSd * normal(rand)))));
    const blocks = Math.ceil(input / MOONCAKE_BLOCK_TOKENS);
    let conv: Conversation | null = null;
    if (rand() < s.continueShare) {
      // The conversation that fits best: idle long enough, the longest context shorter than this prompt.
      let best = -1;
      for (let i = 0; i < open.length; i++) {
        const c = open[i]!;
        if (c.lastAtMs <= at - s.minTurnGapMs && c.contextTokens < input && (best < 0 || c.contextTokens > open[best]!.contextTokens)) best = i;
      }
      if (best >= 0) conv = open.splice(best, 1)[0]!;
    }
    const prefix = conv === null ? [0] : conv.ids.slice(0, Math.min(conv.ids.length, blocks));
    const hashIds = [...prefix, ...fresh(blocks - prefix.length)];
    out.push({ line: 0, timestampMs: at, inputLength: input, outputLength: output, hashIds });
    // The context the next turn extends: this prompt's complete blocks, then new blocks for the
    // rest of the prompt and the answer (the partial block changes content as the answer follows).
    const context = input + output;
    const complete = Math.floor(input / MOONCAKE_BLOCK_TOKENS);
    const next: Conversation = { ids: [...hashIds.slice(0, complete), ...fresh(Math.floor(context / MOONCAKE_BLOCK_TOKENS) - complete)], contextTokens: context, lastAtMs: at };
    open.push(next);
    if (open.length > OPEN_CONVERSATIONS) open.shift();
  }
  return out;
}
