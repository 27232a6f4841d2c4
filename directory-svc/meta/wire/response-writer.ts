/**
 * Compact JSON output (kvcm-meta §1.3): no whitespace, bigint → JSON string (64-bit integers),
 * number → JSON number (32-bit integers; must be finite), `undefined`/`null` members omitted
 * (unset sub-messages and oneof members). Handlers build complete objects with every default
 * already present and enums already as names; this layer does no schema work. Parsed JSON
 * (`Map` objects, `JsonNumber` raw numbers) serializes too, so opaque config values such as a
 * group's `extra_info` are echoed compactly and exactly.
 */
import { JsonNumber } from './json-parse.js';

export class ResponseSerializeError extends Error {
  readonly class = 'response_serialize' as const;
  constructor(reason: string) {
    super(`response_serialize: ${reason}`);
  }
}

/** Serialize a response value; throws ResponseSerializeError (→ HTTP 500 `{}`, §1.2). */
export function writeJson(v: unknown): string {
  const parts: string[] = [];
  write(v, parts, 0);
  return parts.join('');
}

const MAX_DEPTH = 64;

function write(v: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH) throw new ResponseSerializeError('nesting too deep (cycle?)');
  switch (typeof v) {
    case 'string':
      out.push(JSON.stringify(v));
      return;
    case 'bigint':
      out.push('"', v.toString(), '"');
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new ResponseSerializeError(`non-finite number ${v}`);
      out.push(String(v));
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'object': {
      if (v === null) throw new ResponseSerializeError('null value outside an object member');
      if (v instanceof JsonNumber) {
        out.push(v.raw);
        return;
      }
      if (Array.isArray(v)) {
        out.push('[');
        for (let i = 0; i < v.length; i++) {
          if (i > 0) out.push(',');
          const item: unknown = v[i];
          if (item === undefined || item === null) throw new ResponseSerializeError('null array element');
          write(item, out, depth + 1);
        }
        out.push(']');
        return;
      }
      if (v instanceof Map) {
        // map<string,string> fields may be built as Maps.
        out.push('{');
        let first = true;
        for (const [k, val] of v as Map<unknown, unknown>) {
          if (val === undefined || val === null) continue;
          if (!first) out.push(',');
          first = false;
          out.push(JSON.stringify(String(k)), ':');
          write(val, out, depth + 1);
        }
        out.push('}');
        return;
      }
      out.push('{');
      let first = true;
      for (const k of Object.keys(v)) {
        const val: unknown = (v as Record<string, unknown>)[k];
        if (val === undefined || val === null) continue;
        if (!first) out.push(',');
        first = false;
        out.push(JSON.stringify(k), ':');
        write(val, out, depth + 1);
      }
      out.push('}');
      return;
    }
    default:
      throw new ResponseSerializeError(`unserializable ${typeof v}`);
  }
}
