/**
 * Reading one object of the MetaService config file (kvcm-meta §8) while collecting every
 * problem as `config error at <json.path>: <reason>` instead of stopping at the first. Unknown
 * keys are errors; `null` is the same as absent; a bad value leaves the default in place so
 * validation can continue. Pure.
 */
import { JsonNumber, isJsonObject, jsonTypeOf } from '../wire/json-parse.js';
import type { JsonObject, JsonValue } from '../wire/json-parse.js';
import { integerOfJsonNumber } from '../wire/wire-integers.js';

/** Collects the error lines of one config validation. */
export class ConfigIssues {
  readonly lines: string[] = [];
  at(path: string, reason: string): void {
    this.lines.push(`config error at ${path === '' ? '$' : path}: ${reason}`);
  }
}

export function childPath(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

export function indexPath(parent: string, i: number): string {
  return `${parent}[${i}]`;
}

export class ConfigObject {
  constructor(
    private readonly obj: JsonObject,
    readonly path: string,
    private readonly issues: ConfigIssues,
    allowedKeys: readonly string[],
  ) {
    const allowed = new Set(allowedKeys);
    for (const k of obj.keys()) if (!allowed.has(k)) issues.at(childPath(path, k), 'unknown key');
  }

  /** Reader over `v` when it is an object; otherwise an error at `path` and null. */
  static of(v: JsonValue | undefined, path: string, issues: ConfigIssues, allowedKeys: readonly string[]): ConfigObject | null {
    if (!isJsonObject(v)) {
      issues.at(path, `expected an object, got ${v === undefined ? 'nothing' : jsonTypeOf(v)}`);
      return null;
    }
    return new ConfigObject(v, path, issues, allowedKeys);
  }

  at(key: string): string {
    return childPath(this.path, key);
  }

  fail(key: string, reason: string): void {
    this.issues.at(this.at(key), reason);
  }

  /** The raw value; undefined when absent or null. */
  raw(key: string): JsonValue | undefined {
    const v = this.obj.get(key);
    return v === null ? undefined : v;
  }

  has(key: string): boolean {
    return this.raw(key) !== undefined;
  }

  str(key: string, def: string, required = false): string {
    const v = this.raw(key);
    if (v === undefined) {
      if (required) this.fail(key, 'required');
      return def;
    }
    if (typeof v !== 'string') {
      this.fail(key, `expected a string, got ${jsonTypeOf(v)}`);
      return def;
    }
    return v;
  }

  bool(key: string, def: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return def;
    if (typeof v !== 'boolean') {
      this.fail(key, `expected true or false, got ${jsonTypeOf(v)}`);
      return def;
    }
    return v;
  }

  /** An integer in [min, max] (JSON number, integral). */
  int(key: string, def: number, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
    const v = this.raw(key);
    if (v === undefined) return def;
    const n = v instanceof JsonNumber ? integerOfJsonNumber(v.raw) : null;
    if (n === null) {
      this.fail(key, `expected an integer, got ${v instanceof JsonNumber ? v.raw : jsonTypeOf(v)}`);
      return def;
    }
    if (n < BigInt(min) || n > BigInt(max)) {
      this.fail(key, `must be ${rangeText(min, max)}, got ${n}`);
      return def;
    }
    return Number(n);
  }

  /** A non-negative 64-bit integer (bytes), as bigint. */
  uint63(key: string, def: bigint): bigint {
    const v = this.raw(key);
    if (v === undefined) return def;
    const n = v instanceof JsonNumber ? integerOfJsonNumber(v.raw) : null;
    if (n === null || n < 0n || n > 2n ** 63n - 1n) {
      this.fail(key, `expected an integer ≥ 0, got ${v instanceof JsonNumber ? v.raw : jsonTypeOf(v)}`);
      return def;
    }
    return n;
  }

  strList(key: string): string[] {
    const arr = this.array(key);
    const out: string[] = [];
    arr.forEach((v, i) => {
      if (typeof v === 'string') out.push(v);
      else this.issues.at(indexPath(this.at(key), i), `expected a string, got ${jsonTypeOf(v)}`);
    });
    return out;
  }

  array(key: string): JsonValue[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) {
      this.fail(key, `expected an array, got ${jsonTypeOf(v)}`);
      return [];
    }
    return v;
  }
}

function rangeText(min: number, max: number): string {
  if (max === Number.MAX_SAFE_INTEGER) return min === 1 ? '> 0' : `≥ ${min}`;
  return `in [${min}, ${max}]`;
}
