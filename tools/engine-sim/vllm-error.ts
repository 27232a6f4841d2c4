/**
 * vLLM's error answer (`ErrorResponse` / `ErrorInfo` in its OpenAI protocol, written by FastAPI's
 * JSONResponse): `{"error":{"message","type","param","code"}}` in that key order, compact, `param`
 * null unless the error names a request field, `code` the HTTP status.
 */
import type { ServerResponse } from 'node:http';

export function vllmErrorJson(message: string, type: string, status: number, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code: status } });
}

export function sendVllmError(res: ServerResponse, status: number, type: string, message: string, param: string | null = null): void {
  const json = vllmErrorJson(message, type, status, param);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

/** vLLM `_check_model`'s 404 (cache-identity §2 uses the same object at the router). */
export function sendModelNotFound(res: ServerResponse, model: string): void {
  sendVllmError(res, 404, 'NotFoundError', `The model \`${model}\` does not exist.`, 'model');
}
