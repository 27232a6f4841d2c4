/**
 * Turns a PromptInput into what the policy decides on (tokenization.md §2, §4): client token ids
 * as they are, text and chat through the request's model's PromptTokenizer (cache-identity §5:
 * its own, an adapter's parent's, or `--tokenizer`), and anything left without ids (no tokenizer,
 * none for the model, no template, a template error, non-text content, too long) routed by load
 * on the estimate, counted in `router_untokenized_requests_total{reason}` and explained. Used by
 * the proxy and `POST /v1/route` alike. The tokenizer encodes on libuv's thread pool, so a long
 * chat does not hold the event loop.
 */
import type { UntokenizedReason } from '../../shared/tokenize/chat-encoding.js';
import { ModelTokenizers } from '../../shared/tokenize/model-tokenizers.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { ANY_IDENTITY, type RequestIdentity } from '../identity/request-identity.js';
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
  private readonly tokenizers: ModelTokenizers;

  constructor(
    /** Per-model tokenizers; a bare PromptTokenizer is `--tokenizer` alone; null: none, text is routed by load. */
    tokenizers: ModelTokenizers | PromptTokenizer | null,
    private readonly metrics: RouterMetrics,
  ) {
    this.tokenizers = tokenizers instanceof ModelTokenizers ? tokenizers : ModelTokenizers.single(tokenizers);
  }

  /** `input` as the policy sees it, tokenized for `identity`'s model. */
  async resolve(input: PromptInput, identity: RequestIdentity = ANY_IDENTITY): Promise<ResolvedPrompt> {
    if (input.kind === 'token_ids') return { request: input.request, tokenSource: 'token_ids', reason: null };
    const tokenizer = this.tokenizers.forModel(identity.model, identity.parentModel);
    if (tokenizer === null) {
      if (this.tokenizers.isEmpty) return this.estimated(input.estimate, 'no_tokenizer', 'the router runs without --tokenizer or --models_file: text is routed by load');
      const which = identity.model === null ? 'requests without a model' : `model \`${identity.model}\``;
      return this.estimated(input.estimate, 'no_tokenizer_for_model', `no --models_file entry (and no --tokenizer) for ${which}: text is routed by load`);
    }
    const outcome = input.kind === 'text' ? await tokenizer.completion(input.text, input.addSpecialTokens) : await tokenizer.chat(input.chat);
    if (!outcome.ok) return this.estimated(input.estimate, outcome.reason, outcome.detail);
    return { request: { tokenIds: outcome.tokenIds, promptTokens: outcome.tokenIds.length }, tokenSource: 'tokenizer', reason: null };
  }

  private estimated(promptTokens: number, reason: UntokenizedReason, detail: string): ResolvedPrompt {
    this.metrics.untokenized(reason);
    return { request: { tokenIds: null, promptTokens }, tokenSource: 'estimate', reason: `${reason}: ${detail}` };
  }
}
