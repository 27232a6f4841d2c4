/**
 * The OpenAI-compatible proxy (routing.md "OpenAI-compatible proxy"): `POST /v1/completions` and
 * `POST /v1/chat/completions` choose a prefill instance with the configured policy and forward the
 * client's original body unchanged to `http://<instance name><same path>` (an engines-file instance:
 * its `url`). Token-id prompts get CAR credit as they are, text and chat once tokenized
 * (PromptResolver; without ids they go by queue cost, counted). No candidate is 503; an engine
 * failure is 502 naming the instance; a client that disconnects cancels the upstream request.
 */
import type { Context } from 'koa';
import type { Logger } from '../../shared/log/logger.js';
import { readJsonBody } from '../http/json-body.js';
import type { RouteDecider, TrackedDecision } from '../http/route-decider.js';
import type { RouteRequest } from '../policy/policy.js';
import type { RouterMetrics } from '../http/router-metrics.js';
import { isRouterHttpError } from '../http/router-http-errors.js';
import { firstTokenVisible } from './first-token.js';
import type { PromptResolver } from './prompt-resolver.js';
import { chatRouteInput, completionRouteInput, type PromptInput } from './prompt-route-input.js';
import type { UpstreamForwarder } from './upstream-forwarder.js';

export const COMPLETIONS_PATH = '/v1/completions';
export const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';

export interface OpenAiProxyOptions {
  readonly decider: RouteDecider;
  /** Text and chat → token ids (or the estimate, counted). */
  readonly prompts: PromptResolver;
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
    try {
      const body = await readJsonBody(ctx.req, this.opts.maxBodyBytes);
      raw = body.raw;
      timed = firstTokenVisible(body.json);
      prompt = path === COMPLETIONS_PATH ? completionRouteInput(body.json) : chatRouteInput(body.json);
    } catch (e) {
      if (isRouterHttpError(e)) this.opts.metrics.proxyRequest(path, 'bad_request');
      throw e;
    }
    // Tokenizing never fails the request: without ids it is routed by load (and counted).
    const input: RouteRequest = (await this.opts.prompts.resolve(prompt)).request;
    let tracked: TrackedDecision;
    try {
      tracked = await this.opts.decider.decideTracked(input, this.opts.clock());
    } catch (e) {
      if (isRouterHttpError(e)) this.opts.metrics.proxyRequest(path, 'no_candidate');
      throw e;
    }
    const instance = tracked.decision.prefill.name;

    ctx.respond = false;
    const upstream = this.opts.upstreamUrl?.(instance) ?? '';
    // The first byte of a 200 answer marks the first token when the request makes it visible.
    const onFirstChunk = timed
      ? (status: number): void => {
          if (status === 200) tracked.firstToken();
        }
      : undefined;
    const result = await this.opts.forwarder
      .forward(instance, ctx.url, ctx.req, ctx.res, raw, upstream, onFirstChunk)
      // Answered (or failed): the engine no longer holds it, so it leaves the router's own in-flight count.
      .finally(tracked.answered);
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
}
