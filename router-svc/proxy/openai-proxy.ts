/**
 * The OpenAI-compatible proxy (routing.md "OpenAI-compatible proxy"): `POST /v1/completions` and
 * `POST /v1/chat/completions` choose a prefill instance with the configured policy and forward the
 * client's original body unchanged to `http://<instance name><same path>` (an engines-file instance:
 * its `url`). Token-id prompts get CAR credit as they are, text and chat once tokenized
 * (PromptResolver; without ids they go by queue cost, counted). The request's `model` and
 * `cache_salt` (cache-identity §2) restrict the candidates to the model's instances, key the prompt
 * (LoRA adapter, salt) and pick its tokenizer; the body still goes out byte for byte, so the engine
 * reads the same fields. An unknown model is vLLM's 404, a missing one with several base models
 * served a 400, no candidate 503; an engine that vanished before answering (refused, reset) gets
 * the request sent once to the next-best candidate; an engine failure is 502 naming the instance
 * (both, after a retry); a client that
 * disconnects cancels the upstream request.
 */
import type { Context } from 'koa';
import type { Logger } from '../../shared/log/logger.js';
import { readJsonBody } from '../http/json-body.js';
import { parseIdentityFields, resolveIdentity } from '../http/request-identity-fields.js';
import type { RouteDecider, TrackedDecision } from '../http/route-decider.js';
import { jsonObject } from '../http/route-request.js';
import type { IdentityResolver } from '../identity/identity-resolver.js';
import type { RequestIdentity } from '../identity/request-identity.js';
import type { RouteRequest } from '../policy/policy-types.js';
import type { RouterMetrics } from '../http/router-metrics.js';
import { isRouterHttpError, upstreamFailedTwice } from '../http/router-http-errors.js';
import { firstTokenVisible } from './first-token.js';
import type { PromptResolver } from './prompt-resolver.js';
import { chatRouteInput, completionRouteInput, type PromptInput } from './prompt-route-input.js';
import { nextBestPrefill } from './next-best-candidate.js';
import type { ForwardResult, UpstreamForwarder } from './upstream-forwarder.js';

export const COMPLETIONS_PATH = '/v1/completions';
export const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';

export interface OpenAiProxyOptions {
  readonly decider: RouteDecider;
  /** Text and chat → token ids (or the estimate, counted). */
  readonly prompts: PromptResolver;
  /** `model` and `cache_salt` → the request's identity, against the router's view. */
  readonly identities: IdentityResolver;
  readonly forwarder: UpstreamForwarder;
  readonly metrics: RouterMetrics;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
  /** Wall clock for the view's staleness (Date.now in main). */
  readonly clock: () => number;
  /** The base URL of a chosen instance ('' = `http://<name>`): engines-file instances carry one in the view. */
  readonly upstreamUrl?: (instance: string) => string;
}

export class OpenAiProxy {
  constructor(private readonly opts: OpenAiProxyOptions) {}

  /**
   * Serves one request on `path`. Errors before anything was sent are thrown as RouterHttpError
   * for the server's error handler (400, 413, 502, 503); once forwarding starts, this handler owns
   * the raw response (koa's `respond` is off).
   */
  async handle(ctx: Context, path: typeof COMPLETIONS_PATH | typeof CHAT_COMPLETIONS_PATH): Promise<void> {
    let prompt: PromptInput;
    let raw: Buffer;
    let timed: boolean;
    let identity: RequestIdentity;
    try {
      const body = await readJsonBody(ctx.req, this.opts.maxBodyBytes);
      raw = body.raw;
      timed = firstTokenVisible(body.json);
      prompt = path === COMPLETIONS_PATH ? completionRouteInput(body.json) : chatRouteInput(body.json);
      identity = resolveIdentity(this.opts.identities, parseIdentityFields(jsonObject(body.json)));
    } catch (e) {
      if (isRouterHttpError(e)) this.opts.metrics.proxyRequest(path, e.httpStatus === 404 ? 'unknown_model' : 'bad_request');
      throw e;
    }
    // Tokenizing never fails the request: without ids it is routed by load (and counted).
    const input: RouteRequest = { ...(await this.opts.prompts.resolve(prompt, identity)).request, identity };
    let tracked: TrackedDecision;
    try {
      tracked = await this.opts.decider.decideTracked(input, this.opts.clock());
    } catch (e) {
      if (isRouterHttpError(e)) this.opts.metrics.proxyRequest(path, 'no_candidate');
      throw e;
    }
    ctx.respond = false;
    const { instance, result } = await this.forwardWithRetry(ctx, tracked, raw, timed);
    switch (result.kind) {
      case 'ok':
        this.opts.metrics.proxyRequest(path, 'ok');
        return;
      case 'client_abort':
        this.opts.metrics.proxyRequest(path, 'client_abort');
        this.opts.logger.debug({ instance, path }, 'client disconnected: upstream request cancelled');
        return;
      case 'failed_mid_response':
        this.opts.metrics.proxyRequest(path, 'upstream_error');
        this.opts.logger.warn({ instance, path, err: result.error.reason }, 'upstream failed mid-answer');
        return;
      case 'failed_before_response':
        this.opts.metrics.proxyRequest(path, 'upstream_error');
        this.opts.logger.warn({ instance, path, err: result.error.reason }, 'upstream failed');
        // Nothing was sent yet: the server's error handler answers 502 through koa.
        ctx.respond = true;
        throw result.error;
      default: {
        const never: never = result;
        throw new Error(`impossible forward result ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Forwards to the decision's instance and, when that engine vanished before any byte of its
   * answer (refused, reset, unreachable: a pod that just died, before its health probe fails),
   * once more to the decision's next-best prefill candidate, counted
   * `router_upstream_retries_total{reason}`. Never after a byte was relayed (the client has it).
   * A second failure before the answer is one 502 naming both instances.
   */
  private async forwardWithRetry(ctx: Context, tracked: TrackedDecision, body: Buffer, timed: boolean): Promise<{ instance: string; result: ForwardResult }> {
    const first = tracked.decision.prefill.name;
    const result = await this.forwardTo(ctx, first, tracked, body, timed);
    if (result.kind !== 'failed_before_response' || result.vanished === null || ctx.res.destroyed) return { instance: first, result };
    const next = nextBestPrefill(tracked.decision, first);
    if (next === null) return { instance: first, result };
    this.opts.metrics.upstreamRetry(result.vanished);
    this.opts.logger.info({ instance: first, retry_instance: next, reason: result.vanished, err: result.error.reason }, 'engine vanished before answering: sent to the next-best instance');
    const again = await this.forwardTo(ctx, next, this.opts.decider.retarget(tracked, next), body, timed);
    if (again.kind !== 'failed_before_response') return { instance: next, result: again };
    return { instance: next, result: { ...again, error: upstreamFailedTwice(result.error, again.error) } };
  }

  /**
   * One forward to `instance`; its in-flight count ends when it is over, answered or not. `timed`:
   * the request makes its first token visible (first-token.ts), so the first byte of a 200 answer
   * marks it.
   */
  private forwardTo(ctx: Context, instance: string, tracked: TrackedDecision, body: Buffer, timed: boolean): Promise<ForwardResult> {
    const upstream = this.opts.upstreamUrl?.(instance) ?? '';
    const onFirstChunk = timed
      ? (status: number): void => {
          if (status === 200) tracked.firstToken();
        }
      : undefined;
    // Answered (or failed): the engine no longer holds it, so it leaves the router's own in-flight count.
    return this.opts.forwarder.forward(instance, ctx.url, ctx.req, ctx.res, body, upstream, onFirstChunk).finally(tracked.answered);
  }
}
