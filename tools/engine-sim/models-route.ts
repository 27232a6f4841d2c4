/**
 * The served-models routes of the simulated engine, answered as vLLM's API server answers them
 * (cache-identity §1, §6; vLLM `OpenAIServingModels` and its LoRA router):
 *
 *   GET  /v1/models                 `{"object":"list","data":[ModelCard...]}`: the base model,
 *                                   then each adapter with `parent` = base
 *   POST /v1/load_lora_adapter      `{"lora_name","lora_path","load_inplace"?}` → 200 with the
 *                                   plain text `Success: LoRA adapter '<n>' added successfully.`
 *   POST /v1/unload_lora_adapter    `{"lora_name"}` → 200 `Success: LoRA adapter '<n>' removed successfully.`
 *
 * Refusals are vLLM's `ErrorResponse` with its types and statuses (InvalidUserInput 400 for a
 * missing name or a duplicate, NotFoundError 404 for an unknown adapter; a body that is not a JSON
 * object, or a field of the wrong type, is BadRequestError 400 as FastAPI's validation answers).
 * A change is visible to the next `/v1/models` at once. Runtime loading is always on (vLLM needs
 * `VLLM_ALLOW_RUNTIME_LORA_UPDATING`), and any `lora_path` loads: the simulator has no weights.
 *
 * Without `--served_models` the engine serves any model name (lenient) and does not list models:
 * `GET /v1/models` is FastAPI's 404 for a route that is not there, so the directory keeps its list
 * unknown (a candidate for every model), as for an engine without the route. A list it published
 * would be a lie: the names it answers are whatever clients send.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBoundedBody } from '../../shared/http/bounded-body.js';
import type { AdapterRefusal, ServedModelRegistry } from './served-model-registry.js';
import { sendVllmError } from './vllm-error.js';

export const MODELS_PATH = '/v1/models';
export const LOAD_LORA_ADAPTER_PATH = '/v1/load_lora_adapter';
export const UNLOAD_LORA_ADAPTER_PATH = '/v1/unload_lora_adapter';

/** LoRA requests are a few names; anything larger is not one. */
const MAX_ADAPTER_BODY_BYTES = 64 * 1024;

export class ModelsRoute {
  constructor(private readonly registry: ServedModelRegistry) {}

  /** Answers the three paths (true) or leaves the request to the caller (false). */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const path = (req.url ?? '').split('?', 1)[0]!;
    if (path === MODELS_PATH) {
      if (req.method !== 'GET' && req.method !== 'HEAD') methodNotAllowed(res);
      else this.listModels(req, res);
      return true;
    }
    if (path !== LOAD_LORA_ADAPTER_PATH && path !== UNLOAD_LORA_ADAPTER_PATH) return false;
    if (req.method !== 'POST') {
      methodNotAllowed(res);
      return true;
    }
    void this.changeAdapters(req, res, path === LOAD_LORA_ADAPTER_PATH).catch(() => {
      if (!res.headersSent) sendVllmError(res, 500, 'InternalServerError', 'engine error');
      else res.destroy();
    });
    return true;
  }

  private listModels(req: IncomingMessage, res: ServerResponse): void {
    const r = this.registry;
    if (!r.strict) {
      const notFound = '{"detail":"Not Found"}';
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': notFound.length });
      res.end(req.method === 'HEAD' ? undefined : notFound);
      return;
    }
    const created = Math.floor(Date.now() / 1000);
    const data = r.list().map((m) => ({
      id: m.name,
      object: 'model',
      created,
      owned_by: r.ownedBy,
      // vLLM: a base card's root is its model path, an adapter's its lora_path.
      root: m.parent === null ? m.name : (r.adapter(m.name)?.path ?? m.name),
      parent: m.parent,
      max_model_len: m.parent === null ? r.maxModelLen : null,
      permission: [modelPermission(created)],
    }));
    const json = JSON.stringify({ object: 'list', data });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    res.end(req.method === 'HEAD' ? undefined : json);
  }

  private async changeAdapters(req: IncomingMessage, res: ServerResponse, load: boolean): Promise<void> {
    const body = await readBoundedBody(req, MAX_ADAPTER_BODY_BYTES);
    if (body.kind !== 'complete') return sendVllmError(res, body.kind === 'too_large' ? 413 : 400, 'BadRequestError', 'request body could not be read');
    let json: unknown;
    try {
      json = JSON.parse(body.bytes.toString('utf8'));
    } catch {
      return sendVllmError(res, 400, 'BadRequestError', 'body is not valid JSON');
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) return sendVllmError(res, 400, 'BadRequestError', 'body must be a JSON object');
    const o = json as Record<string, unknown>;
    const name = stringField(o, 'lora_name', res);
    if (name === null) return;
    let refusal: AdapterRefusal | null;
    if (load) {
      const path = stringField(o, 'lora_path', res);
      if (path === null) return;
      const inPlace = o['load_inplace'] ?? false;
      if (typeof inPlace !== 'boolean') return sendVllmError(res, 400, 'BadRequestError', 'load_inplace: expected a boolean', 'load_inplace');
      refusal = this.registry.load(name, path, inPlace);
    } else {
      refusal = this.registry.unload(name);
    }
    if (refusal !== null) return sendVllmError(res, refusal.status, refusal.type, refusal.message);
    // vLLM answers a bare Response(content=str): the text, no content type.
    const text = `Success: LoRA adapter '${name}' ${load ? 'added' : 'removed'} successfully.`;
    res.writeHead(200, { 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

/**
 * A request field that must be a string: absent or null reads as '' (vLLM's emptiness checks then
 * answer), another type is a 400 naming it. Null when the 400 went out.
 */
function stringField(o: Record<string, unknown>, field: string, res: ServerResponse): string | null {
  const v = o[field] ?? '';
  if (typeof v === 'string') return v;
  sendVllmError(res, 400, 'BadRequestError', `${field}: expected a string`, field);
  return null;
}

/** vLLM's `ModelPermission` defaults. */
function modelPermission(created: number): Record<string, unknown> {
  return {
    id: `modelperm-${randomBytes(8).toString('hex')}`,
    object: 'model_permission',
    created,
    allow_create_engine: false,
    allow_sampling: true,
    allow_logprobs: true,
    allow_search_indices: false,
    allow_view: true,
    allow_fine_tuning: false,
    organization: '*',
    group: null,
    is_blocking: false,
  };
}

/** FastAPI's answer for a known path with another method. */
function methodNotAllowed(res: ServerResponse): void {
  const json = '{"detail":"Method Not Allowed"}';
  res.writeHead(405, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}
