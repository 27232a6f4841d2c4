/**
 * The status page's two routes on the router's HTTP port: `GET /` (the page) and `GET /v1/status`
 * (its JSON, see status-snapshot.ts). Both are read-only operator surfaces like `/metrics`, open
 * without the internal token: the page's browser cannot send a header it does not know.
 */
import type { RouterInstance } from '@koa/router';
import type { TokenizerInfo } from '../../shared/tokenize/prompt-tokenizer.js';
import type { ViewCache } from '../viewcache/view-cache.js';
import type { HitRatioSeries } from './hit-ratio-series.js';
import { STATUS_PAGE_CSP, STATUS_PAGE_HTML } from './status-page-html.js';
import { buildStatus, type ModelTokenizerInfo } from './status-snapshot.js';

export const STATUS_PAGE_PATH = '/';
export const STATUS_JSON_PATH = '/v1/status';

export interface StatusRouteSources {
  readonly view: ViewCache;
  /** The series RouterMetrics records each decision into. */
  readonly hitRatios: HitRatioSeries;
  /** `--load_balance_policy`. */
  readonly policyName: string;
  /** `--tokenizer` in use; null without one. */
  readonly tokenizer: TokenizerInfo | null;
  /** `--models_file`'s models and their tokenizers; [] without one. */
  readonly modelTokenizers: readonly ModelTokenizerInfo[];
  /** Text requests routed without token ids, by reason. */
  readonly untokenized: () => Readonly<Record<string, number>>;
  /** Wall clock (Date.now). */
  readonly clock: () => number;
}

export function mountStatusRoutes(router: RouterInstance, src: StatusRouteSources): void {
  router.get(STATUS_PAGE_PATH, (ctx) => {
    ctx.status = 200;
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Content-Security-Policy', STATUS_PAGE_CSP);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-store');
    ctx.body = STATUS_PAGE_HTML;
  });
  router.get(STATUS_JSON_PATH, (ctx) => {
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.set('Cache-Control', 'no-store');
    ctx.body = JSON.stringify(buildStatus(src, src.clock()));
  });
}
