/**
 * Compact JSON output (kvcm-meta §1.3): no whitespace, bigint → JSON string (64-bit integers),
 * number → JSON number (32-bit integers; must be finite), `undefined`/`null` members omitted
 * (unset sub-messages and oneof members). Handlers build complete objects with every default
 * already present and enums already as names; this layer does no schema work. Parsed JSON
 * (`Map` objects, `JsonNumber` raw numbers) serializes too, so opaque config values such as a
 * group's `extra_info` are echoed compactly and exactly.
 *
 * Hot path (a 4096-location getCacheLocation answer is ~600 KB): a subtree made only of
 * strings, finite numbers, booleans, arrays and plain objects without null/undefined members
 * is printed by one native `JSON.stringify` call, which is byte-identical to the member-by-member
 * writer below for such values and ~4x cheaper than calling it once per string. Everything else
 * (bigint, Map, JsonNumber, omitted members, errors) goes through that writer, which descends
 * and tries the fast path again on each child.
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
  return write(v, 0);
}

const MAX_DEPTH = 64;
const OBJECT_PROTO = Object.prototype;

function write(v: unknown, depth: number): string {
  if (depth > MAX_DEPTH) throw new ResponseSerializeError('nesting too deep (cycle?)');
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'bigint':
      return `"${v.toString()}"`;
    case 'number':
      if (!Number.isFinite(v)) throw new ResponseSerializeError(`non-finite number ${v}`);
      return String(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object': {
      if (v === null) throw new ResponseSerializeError('null value outside an object member');
      if (v instanceof JsonNumber) return v.raw;
      if (isPlain(v, depth)) return JSON.stringify(v);
      if (Array.isArray(v)) {
        let out = '[';
        for (let i = 0; i < v.length; i++) {
          const item: unknown = v[i];
          if (item === undefined || item === null) throw new ResponseSerializeError('null array element');
          if (i > 0) out += ',';
          out += write(item, depth + 1);
        }
        return `${out}]`;
      }
      let out = '{';
      let first = true;
      if (v instanceof Map) {
        // map<string,string> fields may be built as Maps.
        for (const [k, val] of v as Map<unknown, unknown>) {
          if (val === undefined || val === null) continue;
          if (!first) out += ',';
          first = false;
          out += `${JSON.stringify(String(k))}:${write(val, depth + 1)}`;
        }
        return `${out}}`;
      }
      for (const k of Object.keys(v)) {
        const val: unknown = (v as Record<string, unknown>)[k];
        if (val === undefined || val === null) continue;
        if (!first) out += ',';
        first = false;
        out += `${JSON.stringify(k)}:${write(val, depth + 1)}`;
      }
      return `${out}}`;
    }
    default:
      throw new ResponseSerializeError(`unserializable ${typeof v}`);
  }
}

/**
 * True when `JSON.stringify(v)` prints exactly what `write` would: only strings, finite numbers,
 * booleans, dense arrays without null/undefined elements, and objects whose prototype is
 * Object.prototype or null with no null/undefined member, within the depth limit. Cost: one
 * pass over the subtree, stopping at the first value that needs the member-by-member writer.
 */
function isPlain(v: object, depth: number): boolean {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!isPlainValue(v[i], depth + 1)) return false;
    return true;
  }
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== OBJECT_PROTO && proto !== null) return false;
  // for-in equals Object.keys here: Object.prototype has no enumerable members and the object
  // inherits nothing else.
  for (const k in v) if (!isPlainValue((v as Record<string, unknown>)[k], depth + 1)) return false;
  return true;
}

function isPlainValue(v: unknown, depth: number): boolean {
  // `write` refuses any value deeper than MAX_DEPTH, primitives included.
  if (depth > MAX_DEPTH) return false;
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(v);
    case 'object':
      return v !== null && isPlain(v, depth);
    default:
      return false;
  }
}
