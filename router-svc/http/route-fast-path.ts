/**
 * `POST /v1/route` served on node:http directly, in front of the Koa app: the decision endpoint is
 * the router's hot path (issue 13: `/v1/route` ≥ 0.5 of a bare server that only parses the body),
 * and Koa's context, middleware chain and router dispatch cost about 5–8% of the event loop there.
 * Only the exact request line `POST /v1/route` takes this path; every other request (other paths
 * and methods, a query string, a trailing slash, another letter case) goes to Koa, which answers
 * it as before. The answers are the Koa route's, byte for byte apart from Date: the same
 * route-endpoint.ts functions, the same headers in the same order (`Connection: close` on a 413,
 * then Content-Type as Koa spells it for `application/json`, then Content-Length).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Logger } from '../../shared/log/logger.js';
import { routeAnswer, type RouteEndpointDeps } from './route-endpoint.js';
import { failureAnswer } from './router-http-errors.js';

/** What Koa's `ctx.type = 'application/json'` writes. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * A request listener answering `POST <path>` itself and handing everything else to `fallback`
 * (the Koa app's callback).
 */
export function withRouteFastPath(path: string, deps: RouteEndpointDeps, log: Logger, fallback: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST' || req.url !== path) {
      fallback(req, res);
      return;
    }
    routeAnswer(req, deps).then(
      (answer) => sendJson(res, 200, JSON.stringify(answer), false),
      (e: unknown) => {
        const failure = failureAnswer(e, path, log);
        sendJson(res, failure.status, JSON.stringify(failure.body), failure.close);
      },
    );
  };
}

function sendJson(res: ServerResponse, status: number, text: string, close: boolean): void {
  // A client gone before the answer: Koa ends such a response without a body, so does this.
  if (res.writableEnded || res.socket?.writable === false) {
    res.end();
    return;
  }
  res.statusCode = status;
  if (close) res.setHeader('Connection', 'close');
  res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
