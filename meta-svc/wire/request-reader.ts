/**
 * Typed, rule-checked access to one parsed request message (kvcm-meta §1.3 input rules):
 * - a field is looked up by its snake_case name and also by lowerCamelCase; both spellings in one
 *   object → BadRequestError (HTTP 400);
 * - `null` is the same as absent; unknown fields are ignored at every depth (never touched);
 * - getters return the protobuf default when the field is absent (use `has` to tell);
 * - a value of the wrong JSON type, a fraction or an out-of-range integer → BadRequestError naming
 *   the field path (the HTTP body stays `{}`, the reason goes to the WARN log).
 * Enums accept a name (exact case) or a number; unknown ones parse as 0.
 */
import { BadRequestError } from '../meta-errors.js';
import { enumNumberOf, isEnumValue } from '../meta-enums.js';
import type { EnumTable } from '../meta-enums.js';
import { JsonNumber, isJsonObject, jsonTypeOf } from './json-parse.js';
import type { JsonObject, JsonValue } from './json-parse.js';
import {
  INT32_MAX,
  INT32_MIN,
  INT64_MAX,
  INT64_MIN,
  UINT64_MAX,
  inRange,
  integerOfDecimalString,
  integerOfJsonNumber,
} from './wire-integers.js';

const camelCache = new Map<string, string>();

/** `location_spec_infos` → `locationSpecInfos` (protobuf json_name). */
export function lowerCamelOf(snake: string): string {
  let c = camelCache.get(snake);
  if (c === undefined) {
    c = snake.replace(/_([a-z0-9])/g, (_m, ch: string) => ch.toUpperCase());
    camelCache.set(snake, c);
  }
  return c;
}

export class RequestReader {
  /**
   * Where this message sits, for error reasons only, so it is built on demand: a reportEvent
   * with 100k items would otherwise build 200k path strings that no one reads.
   */
  private parent: RequestReader | null = null;
  private field = '';
  private index = -1;

  /**
   * @param obj the parsed JSON object of this message
   * @param basePath the message's location for error reasons (`""` for the request root)
   */
  constructor(
    private readonly obj: JsonObject,
    private readonly basePath: string = '',
  ) {}

  /** Root reader; a non-object body is a §1.2 400. */
  static ofBody(v: JsonValue): RequestReader {
    if (!isJsonObject(v)) throw new BadRequestError(`body is a JSON ${jsonTypeOf(v)}, not an object`);
    return new RequestReader(v);
  }

  /** The message's location for error reasons, e.g. `events[3].block_add` (`""` for the root). */
  get path(): string {
    if (this.parent === null) return this.basePath;
    const p = this.parent.fieldPath(this.field);
    return this.index < 0 ? p : `${p}[${this.index}]`;
  }

  /** Number of members present in the object, null-valued ones included. */
  get memberCount(): number {
    return this.obj.size;
  }

  private child(obj: JsonObject, field: string, index: number): RequestReader {
    const r = new RequestReader(obj);
    r.parent = this;
    r.field = field;
    r.index = index;
    return r;
  }

  private fieldPath(name: string): string {
    const path = this.path;
    return path === '' ? name : `${path}.${name}`;
  }

  private bad(name: string, expected: string, got: JsonValue, index?: number): never {
    const where = index === undefined ? this.fieldPath(name) : `${this.fieldPath(name)}[${index}]`;
    throw new BadRequestError(`field ${where}: expected ${expected}, got ${describe(got)}`);
  }

  /** The field's value by either spelling; undefined when absent or null. */
  private raw(name: string): JsonValue | undefined {
    // null = absent (§1.3), so a null spelling never conflicts with the other one.
    const snakeV = nonNull(this.obj.get(name));
    const camel = lowerCamelOf(name);
    if (camel === name) return snakeV;
    const camelV = nonNull(this.obj.get(camel));
    if (snakeV !== undefined && camelV !== undefined) {
      throw new BadRequestError(`field ${this.fieldPath(name)} given as both ${name} and ${camel}`);
    }
    return snakeV !== undefined ? snakeV : camelV;
  }

  /** True when the field is present and not null. */
  has(name: string): boolean {
    return this.raw(name) !== undefined;
  }

  /** Raw keys present with a non-null value, as spelled in the request (for oneof checks). */
  keys(): string[] {
    const out: string[] = [];
    for (const [k, v] of this.obj) if (v !== null) out.push(k);
    return out;
  }

  str(name: string): string {
    const v = this.raw(name);
    if (v === undefined) return '';
    if (typeof v !== 'string') this.bad(name, 'string', v);
    return v;
  }

  bool(name: string): boolean {
    const v = this.raw(name);
    if (v === undefined) return false;
    if (typeof v !== 'boolean') this.bad(name, 'true or false', v);
    return v;
  }

  int32(name: string): number {
    const v = this.raw(name);
    if (v === undefined) return 0;
    return Number(this.integer(name, v, INT32_MIN, INT32_MAX, 'int32'));
  }

  /** Signed 64-bit integer, exact. */
  int64(name: string): bigint {
    const v = this.raw(name);
    if (v === undefined) return 0n;
    return this.integer(name, v, INT64_MIN, INT64_MAX, 'int64');
  }

  uint64(name: string): bigint {
    const v = this.raw(name);
    if (v === undefined) return 0n;
    return this.integer(name, v, 0n, UINT64_MAX, 'uint64');
  }

  /** Enum number: name (exact case) or integer; unknown → 0 (§1.3). */
  enumOf(name: string, table: EnumTable): number {
    const v = this.raw(name);
    if (v === undefined) return 0;
    return this.enumValue(name, v, table);
  }

  int64List(name: string): bigint[] {
    const arr = this.list(name);
    const out = new Array<bigint>(arr.length);
    for (let i = 0; i < arr.length; i++) out[i] = this.integer(name, arr[i] as JsonValue, INT64_MIN, INT64_MAX, 'int64', i);
    return out;
  }

  int32List(name: string): number[] {
    const arr = this.list(name);
    const out = new Array<number>(arr.length);
    for (let i = 0; i < arr.length; i++) out[i] = Number(this.integer(name, arr[i] as JsonValue, INT32_MIN, INT32_MAX, 'int32', i));
    return out;
  }

  strList(name: string): string[] {
    const arr = this.list(name);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i] as JsonValue;
      if (typeof v !== 'string') this.bad(name, 'string', v, i);
    }
    return arr as string[];
  }

  boolList(name: string): boolean[] {
    const arr = this.list(name);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i] as JsonValue;
      if (typeof v !== 'boolean') this.bad(name, 'true or false', v, i);
    }
    return arr as boolean[];
  }

  enumList(name: string, table: EnumTable): number[] {
    const arr = this.list(name);
    const out = new Array<number>(arr.length);
    for (let i = 0; i < arr.length; i++) out[i] = this.enumValue(name, arr[i] as JsonValue, table, i);
    return out;
  }

  /** Sub-message, or null when absent. */
  message(name: string): RequestReader | null {
    const v = this.raw(name);
    if (v === undefined) return null;
    if (!isJsonObject(v)) this.bad(name, 'object', v);
    return this.child(v, name, -1);
  }

  /** Repeated sub-message; absent → []. */
  messages(name: string): RequestReader[] {
    const arr = this.list(name);
    const out = new Array<RequestReader>(arr.length);
    for (let i = 0; i < arr.length; i++) {
      const v = arr[i] as JsonValue;
      if (!isJsonObject(v)) this.bad(name, 'object', v, i);
      out[i] = this.child(v, name, i);
    }
    return out;
  }

  /** map<string,string>; absent → empty map. */
  map(name: string): Map<string, string> {
    const v = this.raw(name);
    const out = new Map<string, string>();
    if (v === undefined) return out;
    if (!isJsonObject(v)) this.bad(name, 'object', v);
    for (const [k, val] of v) {
      if (typeof val !== 'string') {
        throw new BadRequestError(`field ${this.fieldPath(name)}[${JSON.stringify(k)}]: expected string, got ${describe(val)}`);
      }
      out.set(k, val);
    }
    return out;
  }

  private list(name: string): readonly JsonValue[] {
    const v = this.raw(name);
    if (v === undefined) return [];
    if (!Array.isArray(v)) this.bad(name, 'array', v);
    return v;
  }

  private integer(name: string, v: JsonValue, min: bigint, max: bigint, what: string, index?: number): bigint {
    let n: bigint | null = null;
    if (v instanceof JsonNumber) n = integerOfJsonNumber(v.raw);
    else if (typeof v === 'string') n = integerOfDecimalString(v);
    else this.bad(name, `${what} (number or decimal string)`, v, index);
    if (n === null) this.bad(name, `${what} (an integer)`, v, index);
    if (!inRange(n, min, max)) this.bad(name, `${what} in range`, v, index);
    return n;
  }

  private enumValue(name: string, v: JsonValue, table: EnumTable, index?: number): number {
    if (typeof v === 'string') return enumNumberOf(table, v);
    if (v instanceof JsonNumber) {
      const n = integerOfJsonNumber(v.raw);
      if (n === null || !inRange(n, INT32_MIN, INT32_MAX)) this.bad(name, 'enum name or int32 number', v, index);
      const num = Number(n);
      return isEnumValue(table, num) ? num : 0;
    }
    return this.bad(name, 'enum name or number', v, index);
  }
}

function nonNull(v: JsonValue | undefined): JsonValue | undefined {
  return v === null ? undefined : v;
}

/** A value's type and a short excerpt for the WARN log reason. */
function describe(v: JsonValue): string {
  const t = jsonTypeOf(v);
  if (v instanceof JsonNumber) return `number ${v.raw.length > 40 ? `${v.raw.slice(0, 40)}…` : v.raw}`;
  if (typeof v === 'string') return `string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  if (typeof v === 'boolean') return `bool ${v}`;
  return t;
}
