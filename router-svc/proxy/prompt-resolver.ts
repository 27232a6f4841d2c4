/**
 * Turns a PromptInput into what the policy decides on (tokenization.md §2, §4): client token ids
 * as they are, text and chat through the shared PromptTokenizer, and anything left without ids
 * (no tokenizer, no template, a template error, non-text content, too long) routed by load on the
 * estimate, counted in `router_untokenized_requests_total{reason}` and explained. Used by the
 * proxy and `POST /v1/route` alike. The tokenizer encodes on libuv's thread pool, so a long chat
 * does not hold the event loop.
 */
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import type { UntokenizedReason } from '../../shared/tokenize/chat-encoding.js';
import type { RouteRequest } from '../policy/policy-types.js';
import type { RouterMetrics } from '../http/router-metrics.js';
import type { PromptInput } from './prompt-route-input.js';

export type TokenSource = 'token_ids' | 'tokenizer' | 'estimate';

export interface ResolvedPrompt {
  readonly request: RouteRequest;
  readonly tokenSource: TokenSource;
  /** Why there are no ids (`estimate` only): `reason: detail`. */
  readonly reason: string | null;
}

export class PromptResolver {
  constructor(
    /** null: no `--tokenizer`, every text request is routed by load. */
    private readonly tokenizer: PromptTokenizer | null,
    private readonly metrics: RouterMetrics,
  ) {}

  async resolve(input: PromptInput): Promise<ResolvedPrompt> {
    if (input.kind === 'token_ids') return { request: input.request, tokenSource: 'token_ids', reason: null };
    if (this.tokenizer === null) return this.estimated(input.estimate, 'no_tokenizer', 'the router runs without --tokenizer: text is routed by load');
    const outcome = input.kind === 'text' ? await this.tokenizer.completion(input.text, input.addSpecialTokens) : await this.tokenizer.chat(input.chat);
    if (!outcome.ok) return this.estimated(input.estimate, outcome.reason, outcome.detail);
    return { request: { tokenIds: outcome.tokenIds, promptTokens: outcome.tokenIds.length }, tokenSource: 'tokenizer', reason: null };
  }

  private estimated(promptTokens: number, reason: UntokenizedReason, detail: string): ResolvedPrompt {
    this.metrics.untokenized(reason);
    return { request: { tokenIds: null, promptTokens }, tokenSource: 'estimate', reason: `${reason}: ${detail}` };
  }
}
