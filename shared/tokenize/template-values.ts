/**
 * The values of a compiled chat template (compiled-template.ts) and what @huggingface/jinja
 * 0.5.11's interpreter does with them, on plain JavaScript values instead of its RuntimeValue
 * wrappers: strings, numbers, booleans, null (NullValue), undefined (UndefinedValue), arrays,
 * plain objects (ObjectValue, key order as Object.entries gives it, which is the order the
 * interpreter's Map gets), Namespace and the callables. Each rule mirrors one in the
 * interpreter (dist/index.js: toJSON, __bool__, toString, evaluateMemberExpression, the string
 * builtins); a case that has no plain-value equivalent throws NotCompiled, and that render is
 * done by the interpreter (an exact answer, never a guess).
 *
 * Numbers: an integral number is the interpreter's IntegerValue and any other its FloatValue,
 * as convertToRuntimeValues classifies input. A float with an integral value ("2.0") has no
 * plain form: producing one throws NotCompiled.
 */

/** This render needs the interpreter (a case the compiled form does not model); not an error of the template. */
export class NotCompiled extends Error {}

/** `namespace()`: attributes assignable with `{% set ns.x = ... %}`. */
export class Namespace {
  constructor(readonly entries: Map<string, unknown>) {}
}

/** A callable value: a global (namespace, range, ...), a builtin method bound to its receiver, or a macro. */
export abstract class Callable {
  abstract call(args: unknown[], kwargs: Map<string, unknown> | null): unknown;
}

/**
 * The arrays that are tuples (a TupleLiteral's value): the interpreter's TupleValue is not
 * `iterable`, cannot be unpacked by a loop and has no JSON form.
 */
export const TUPLES = new WeakSet<unknown[]>();

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Namespace) && !(v instanceof Callable);
}

/** `__bool__`: Python truthiness as the interpreter has it (a namespace and a function are always true). */
export function truthy(v: unknown): boolean {
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0 && !Number.isNaN(v);
  if (v === null || v === undefined) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Namespace || v instanceof Callable) return true;
  for (const k in v as object) if (Object.hasOwn(v as object, k)) return true;
  return false;
}

/** A number result of float arithmetic: representable only when it is not integral. */
export function floatResult(n: number): number {
  if (Number.isInteger(n)) throw new NotCompiled('integral float');
  return n;
}

/** `{{ value }}` / evaluateBlock: RuntimeValue.toString, null and undefined print nothing. */
export function output(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v instanceof Callable) throw new NotCompiled('printed function');
  return toJson(v, NO_JSON_OPTIONS, 0, false);
}

/** The raw JavaScript `value.toString()` the interpreter uses for `~` and string `+`. */
export function rawString(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new NotCompiled('raw string of a container');
}

export interface JsonOptions {
  readonly indent: number | null;
  readonly ensureAscii: boolean;
  readonly sortKeys: boolean;
  readonly separators: readonly [string, string] | null;
}

export const NO_JSON_OPTIONS: JsonOptions = { indent: null, ensureAscii: false, sortKeys: false, separators: null };

const NON_ASCII_CHARS = /[\x7f-\uffff]/g;

function asciiSafe(s: string): string {
  return s.replace(NON_ASCII_CHARS, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** The interpreter's toJSON (`tojson`, and how containers print), formatting included. */
export function toJson(v: unknown, o: JsonOptions, depth: number, undefinedToNull: boolean): string {
  if (v === null) return 'null';
  if (v === undefined) return undefinedToNull ? 'null' : 'undefined';
  if (typeof v === 'number' || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'string') return o.ensureAscii ? asciiSafe(JSON.stringify(v)) : JSON.stringify(v);
  if (v instanceof Callable) throw new NotCompiled('tojson of a function');
  const [itemSep, keySep] = o.separators ?? (o.indent ? [',', ': '] : [', ', ': ']);
  const indentValue = o.indent ? ' '.repeat(o.indent) : '';
  const basePadding = '\n' + indentValue.repeat(depth);
  const childrenPadding = basePadding + indentValue;
  if (Array.isArray(v)) {
    if (TUPLES.has(v)) throw new NotCompiled('tuple to JSON');
    const core = v.map((x: unknown) => toJson(x, o, depth + 1, undefinedToNull));
    return o.indent && core.length > 0 ? `[${childrenPadding}${core.join(`${itemSep}${childrenPadding}`)}${basePadding}]` : `[${core.join(itemSep)}]`;
  }
  let entries = v instanceof Namespace ? Array.from(v.entries.entries()) : Object.entries(v as Record<string, unknown>);
  if (o.sortKeys) entries = entries.sort(([a], [b]) => a.localeCompare(b));
  const core = entries.map(([key, value]) => {
    const k = o.ensureAscii ? asciiSafe(JSON.stringify(key)) : JSON.stringify(key);
    const item = `${k}${keySep}${toJson(value, o, depth + 1, undefinedToNull)}`;
    return o.indent ? `${childrenPadding}${item}` : item;
  });
  return o.indent && core.length > 0 ? `{${core.join(itemSep)}${basePadding}}` : `{${core.join(itemSep)}}`;
}

/** utils.ts `slice`: Python slicing (negative indexes, negative steps). */
export function sliceOf<T>(array: readonly T[], start: number | undefined, stop: number | undefined, step = 1): T[] {
  const direction = Math.sign(step);
  let from: number;
  let to: number;
  if (direction >= 0) {
    from = (start ??= 0) < 0 ? Math.max(array.length + start, 0) : Math.min(start, array.length);
    to = (stop ??= array.length) < 0 ? Math.max(array.length + stop, 0) : Math.min(stop, array.length);
  } else {
    from = (start ??= array.length - 1) < 0 ? Math.max(array.length + start, -1) : Math.min(start, array.length - 1);
    to = (stop ??= -1) < -1 ? Math.max(array.length + stop, -1) : Math.min(stop, array.length - 1);
  }
  const out: T[] = [];
  for (let i = from; direction * i < direction * to; i += step) out.push(array[i]!);
  return out;
}

/** `a == b`: the interpreter compares the raw values with JavaScript's `==` (null and undefined alike). */
export function looseEquals(a: unknown, b: unknown): boolean {
  if (a instanceof Callable || b instanceof Callable) throw new NotCompiled('== on a function');
  const ao = typeof a === 'object' && a !== null;
  const bo = typeof b === 'object' && b !== null;
  if (ao || bo) {
    // Containers compare by identity (their Maps and arrays); against a scalar JavaScript would stringify them.
    if (ao && bo) return a === b;
    throw new NotCompiled('== between a container and a scalar');
  }
  // Loose on purpose: the interpreter's own rule (`left.value == right.value`).
  return (a ?? undefined) == (b ?? undefined);
}
