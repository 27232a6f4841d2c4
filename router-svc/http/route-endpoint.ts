/**
 * `POST /v1/route` (routing.md "HTTP API"): body → prompt → decision → the answer object. Shared
 * by the Koa app and the raw node:http fast path in front of it (route-fast-path.ts), so both
 * answer the same bytes.
 */
import type { IncomingMessage } from 'node:http';
import type { IdentityResolver } from '../identity/identity-resolver.js';
import { explainIdentity } from '../identity/request-identity.js';
import type { PromptResolver } from '../proxy/prompt-resolver.js';
import { routeEndpointInput } from '../proxy/prompt-route-input.js';
import { readJsonBody } from './json-body.js';
import { parseIdentityFields, resolveIdentity } from './request-identity-fields.js';
import type { RouteDecider } from './route-decider.js';
import { jsonObject, parseDryRun } from './route-request.js';

export interface RouteEndpointDeps {
  readonly decider: RouteDecider;
  readonly prompts: PromptResolver;
  /** `model` and `cache_salt` → the request's identity (cache-identity §2), against the same view. */
  readonly identities: IdentityResolver;
  readonly maxBodyBytes: number;
  readonly clock: () => number;
}

/** The answer to one `/v1/route` request, or a thrown RouterHttpError (400, 404, 413, 503). */
export async function routeAnswer(req: IncomingMessage, deps: RouteEndpointDeps): Promise<object> {
  // JSON.parse of an 8k-token body costs about what a hand-written token scanner does (measured
  // 0.3 ms each for 50 KB), so there is no special parser for it.
  const body = await readJsonBody(req, deps.maxBodyBytes);
  const input = routeEndpointInput(body.json);
  const o = jsonObject(body.json);
  // Checked before tokenizing; text and chat resolve to a request that does not carry it.
  const dryRun = parseDryRun(o);
  // Before tokenizing too: the model picks the tokenizer (cache-identity §5).
  const identity = resolveIdentity(deps.identities, parseIdentityFields(o));
  const resolved = await deps.prompts.resolve(input, identity);
  const decision = await deps.decider.decideOrdered({ ...resolved.request, dryRun, identity }, deps.clock());
  // tokenization.md §2: how many tokens the decision saw and where they came from, and why when estimated.
  const answer: Record<string, unknown> = { ...decision, input_tokens: resolved.request.promptTokens, token_source: resolved.tokenSource };
  if (resolved.reason !== null) answer['reason'] = resolved.reason;
  // cache-identity §2: the identity used (never the salt) and who was left out for serving other models.
  answer['identity'] = explainIdentity(identity);
  answer['excluded_for_model'] = deps.identities.excluded(identity);
  return answer;
}
