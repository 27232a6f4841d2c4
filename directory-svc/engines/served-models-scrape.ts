/**
 * An engine's served models from its `GET <url>/v1/models` (cache-identity §1): the OpenAI list
 * vLLM, SGLang and the simulator answer,
 *
 *   {"object": "list", "data": [
 *     {"id": "meta-llama/Llama-3.1-8B", "object": "model", "root": "/models/llama", "parent": null, "max_model_len": 131072, "permission": [...]},
 *     {"id": "sql-lora", "object": "model", "root": "/adapters/sql", "parent": "meta-llama/Llama-3.1-8B", ...}]}
 *
 * An entry with a non-null `parent` is a LoRA adapter of it; the others are base models (vLLM
 * lists one per `--served-model-name` alias). Fields we do not read are ignored, as any OpenAI
 * client ignores them. Three parts: the pure parser, the bounded fetch, and `ServedModelsState`,
 * the pure keep-last-good and log-once rules that `EngineScraper` drives on its own timer.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import { modelNameProblem } from '../../shared/view/model-pin.js';
import { sameModelLists, type ServedModel, type ServedModelList } from '../../shared/view/served-models.js';

/** A `/v1/models` answer we cannot use (unreachable, not 200, not the OpenAI list). */
export class ServedModelsError extends DomainError {
  readonly class = 'models' as const;
}

/**
 * A list of a few thousand adapters is a few hundred KiB; anything past this is not a model list,
 * and reading it whole every period would cost the directory's event loop for nothing.
 */
export const MAX_MODELS_BODY_BYTES = 4 * 1024 * 1024;

/** Parses a `/v1/models` body; throws `ServedModelsError` naming what is wrong. Pure. */
export function parseServedModels(text: string): readonly ServedModel[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ServedModelsError(`not JSON: ${e instanceof Error ? e.message.split('\n')[0]! : 'syntax error'}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ServedModelsError('expected {"object": "list", "data": [...]}, got no JSON object');
  const o = json as Record<string, unknown>;
  // An error object or another endpoint's answer served with 200 must not read as "no models".
  if (o['object'] !== undefined && o['object'] !== 'list') throw new ServedModelsError(`object: expected "list", got ${JSON.stringify(o['object'])}`);
  const data = o['data'];
  if (!Array.isArray(data)) throw new ServedModelsError('data: expected an array of models');
  // An inference engine always serves its base model: an empty list is a broken answer, and
  // taking it would make the instance a candidate for no model at all.
  if (data.length === 0) throw new ServedModelsError('data: lists no model');
  const out: ServedModel[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < data.length; i++) {
    const card: unknown = data[i];
    if (typeof card !== 'object' || card === null || Array.isArray(card)) throw new ServedModelsError(`data[${i}]: expected a model object`);
    const c = card as Record<string, unknown>;
    const id = c['id'];
    const idProblem = modelNameProblem(id);
    if (idProblem !== null) throw new ServedModelsError(`data[${i}].id: ${idProblem}`);
    const parent = c['parent'];
    if (parent !== undefined && parent !== null) {
      const parentProblem = modelNameProblem(parent);
      if (parentProblem !== null) throw new ServedModelsError(`data[${i}].parent: ${parentProblem}`);
    }
    // The same id twice (an alias equal to an adapter name): the first entry is what a request gets.
    if (seen.has(id as string)) continue;
    seen.add(id as string);
    out.push(Object.freeze({ name: id as string, parent: parent === undefined || parent === null ? null : (parent as string) }));
  }
  return Object.freeze(out);
}

/**
 * The engine does not serve `/v1/models` at all (404: an engine without the route, or the
 * simulator without `--served_models`): its list stays unknown, a candidate for every model. Not a
 * failure of an engine that lists its models, so not counted as one. A decision of ours: the spec
 * names failed and malformed scrapes only.
 */
export const MODELS_NOT_SERVED = 'not_served';

/**
 * `GET <baseUrl>/v1/models` and its parse, or MODELS_NOT_SERVED on a 404; rejects with
 * `ServedModelsError` (the transport's own errors are converted here, with their cause code, so a
 * log line says ECONNREFUSED or a timeout).
 */
export async function fetchServedModels(baseUrl: string, signal: AbortSignal): Promise<readonly ServedModel[] | typeof MODELS_NOT_SERVED> {
  let text: string;
  try {
    const res = await fetch(`${baseUrl}/v1/models`, { signal, redirect: 'manual', headers: { accept: 'application/json' } });
    text = await boundedText(res);
    if (res.status === 404) return MODELS_NOT_SERVED;
    if (res.status !== 200) throw new ServedModelsError(`GET /v1/models answered ${res.status}`);
  } catch (e) {
    if (e instanceof ServedModelsError) throw e;
    throw new ServedModelsError(`GET /v1/models failed: ${transportReason(e)}`);
  }
  return parseServedModels(text);
}

async function boundedText(res: Response): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > MAX_MODELS_BODY_BYTES) {
    await res.body?.cancel();
    throw new ServedModelsError(`GET /v1/models body of ${declared} bytes is above ${MAX_MODELS_BODY_BYTES}`);
  }
  if (res.body === null) return '';
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of res.body) {
    bytes += chunk.byteLength;
    if (bytes > MAX_MODELS_BODY_BYTES) {
      await res.body.cancel().catch(() => undefined);
      throw new ServedModelsError(`GET /v1/models body is above ${MAX_MODELS_BODY_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `fetch failed (ECONNREFUSED)`, `timed out`: stable words, so one outage logs one line. */
function transportReason(e: unknown): string {
  if (e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError')) return e.name === 'TimeoutError' ? 'timed out' : 'aborted';
  const cause = e instanceof Error ? (e as { cause?: unknown }).cause : undefined;
  const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String((cause as { code: unknown }).code) : null;
  const message = e instanceof Error ? e.message : String(e);
  return code === null ? message : `${message} (${code})`;
}

/** What one scrape's outcome means for the table and the log. */
export type ServedModelsOutcome =
  | { readonly kind: 'good'; readonly changed: boolean; readonly recovered: boolean }
  | { readonly kind: 'failed'; readonly firstOfItsKind: boolean }
  | { readonly kind: 'not_served'; readonly firstOfItsKind: boolean };

/**
 * Bound on the distinct errors remembered within one failure episode; past it the set starts
 * over (an error text carrying a changing value then logs again, bounded by the period).
 */
const MAX_REMEMBERED_ERRORS = 16;

/**
 * One engine's served models as its scrapes tell them (cache-identity §1): unknown (null) until
 * the first good scrape; a failed or malformed scrape keeps the last good list. Each distinct
 * error is logged once per failure episode (a good scrape ends the episode). Pure.
 */
export class ServedModelsState {
  private last: ServedModelList = null;
  private readonly errorsSeen = new Set<string>();
  private notServedSeen = false;

  /** The last good list; null before the first good scrape. */
  get list(): ServedModelList {
    return this.last;
  }

  good(list: readonly ServedModel[]): ServedModelsOutcome {
    const recovered = this.errorsSeen.size > 0;
    this.errorsSeen.clear();
    this.notServedSeen = false;
    const changed = this.last === null || !sameModelLists(this.last, list);
    if (changed) this.last = list;
    return { kind: 'good', changed, recovered };
  }

  /** A 404: the last good list (unknown before one) stays; told once until the engine answers a list. */
  notServed(): ServedModelsOutcome {
    const first = !this.notServedSeen;
    this.notServedSeen = true;
    return { kind: 'not_served', firstOfItsKind: first };
  }

  failed(detail: string): ServedModelsOutcome {
    if (this.errorsSeen.has(detail)) return { kind: 'failed', firstOfItsKind: false };
    if (this.errorsSeen.size >= MAX_REMEMBERED_ERRORS) this.errorsSeen.clear();
    this.errorsSeen.add(detail);
    return { kind: 'failed', firstOfItsKind: true };
  }
}
