/**
 * The filters, tests, methods and globals a compiled chat template (compiled-template.ts) may
 * use, each with @huggingface/jinja 0.5.11's behaviour on plain values (template-values.ts):
 * `strip('\n')` strips all whitespace because its interpreter ignores the argument, `first` of an
 * empty list is an error there, and so on. A name missing from these tables makes the compiler
 * decline the template; a combination modelled nowhere here throws NotCompiled or an Error, and
 * the render is redone by the interpreter, whose answer (text or error) is the one used.
 */
import { Callable, isPlainObject, Namespace, NO_JSON_OPTIONS, NotCompiled, rawString, toJson, truthy, type JsonOptions } from './template-values.js';

export type Kwargs = Map<string, unknown> | null;

const STRING_METHODS = new Set(['upper', 'lower', 'strip', 'title', 'capitalize', 'rstrip', 'lstrip', 'startswith', 'endswith', 'split', 'replace']);
const OBJECT_METHODS = new Set(['get', 'items', 'keys', 'values', 'dictsort']);

/** A builtin method with its receiver (`message.content.startswith`), what member access yields. */
class BoundMethod extends Callable {
  constructor(
    private readonly receiver: string | Record<string, unknown>,
    private readonly name: string,
  ) {
    super();
  }

  call(args: unknown[], kwargs: Kwargs): unknown {
    return typeof this.receiver === 'string' ? stringMethod(this.receiver, this.name, args, kwargs) : objectMethod(this.receiver, this.name, args, kwargs);
  }
}

/** `obj.prop` and `obj[prop]` (evaluateMemberExpression), slices excluded. */
export function member(obj: unknown, prop: unknown): unknown {
  if (typeof obj === 'string') {
    if (typeof prop === 'string') {
      if (prop === 'length') return obj.length;
      return STRING_METHODS.has(prop) ? new BoundMethod(obj, prop) : undefined;
    }
    if (typeof prop === 'number' && Number.isInteger(prop)) return obj.at(prop);
    throw new Error('Cannot access property with non-string/non-number');
  }
  if (typeof obj === 'object' && obj !== null) {
    if (Array.isArray(obj)) {
      if (typeof prop === 'number' && Number.isInteger(prop)) return obj.at(prop);
      if (typeof prop !== 'string') throw new Error('Cannot access property with non-string/non-number');
      return prop === 'length' ? obj.length : undefined;
    }
    if (typeof prop !== 'string') throw new Error('Cannot access property with non-string');
    if (obj instanceof Namespace) return obj.entries.get(prop);
    if (obj instanceof Callable) return undefined;
    const o = obj as Record<string, unknown>;
    const v = o[prop];
    // Data values are never functions, so a defined non-function is the object's own (the inherited are functions, or __proto__).
    if (v !== undefined && typeof v !== 'function' && prop !== '__proto__') return v;
    if (Object.hasOwn(o, prop)) return v;
    return OBJECT_METHODS.has(prop) ? new BoundMethod(o, prop) : undefined;
  }
  if (typeof prop !== 'string') throw new Error('Cannot access property with non-string');
  return undefined;
}

function noKwargs(kwargs: Kwargs): void {
  if (kwargs !== null) throw new NotCompiled('keyword arguments to a builtin');
}

function hasAffix(s: string, affix: string, atStart: boolean): boolean {
  return atStart ? s.startsWith(affix) : s.endsWith(affix);
}

function affix(s: string, args: unknown[], atStart: boolean): boolean {
  if (args.length === 0) throw new Error('startswith()/endswith() requires at least one argument');
  const pattern = args[0];
  if (typeof pattern === 'string') return hasAffix(s, pattern, atStart);
  if (Array.isArray(pattern)) {
    for (const item of pattern) {
      if (typeof item !== 'string') throw new Error('tuple elements must be strings');
      if (hasAffix(s, item, atStart)) return true;
    }
    return false;
  }
  throw new Error('argument must be a string or tuple of strings');
}

function stringMethod(s: string, name: string, args: unknown[], kwargs: Kwargs): unknown {
  switch (name) {
    // The interpreter ignores any argument of these (strip('\n') strips all whitespace).
    case 'upper':
      return s.toUpperCase();
    case 'lower':
      return s.toLowerCase();
    case 'strip':
      return s.trim();
    case 'rstrip':
      return s.trimEnd();
    case 'lstrip':
      return s.trimStart();
    case 'title':
      return s.replace(/\b\w/g, (c) => c.toUpperCase());
    case 'capitalize':
      return s.charAt(0).toUpperCase() + s.slice(1);
    case 'startswith':
      noKwargs(kwargs);
      return affix(s, args, true);
    case 'endswith':
      noKwargs(kwargs);
      return affix(s, args, false);
    case 'split':
      noKwargs(kwargs);
      return split(s, args);
    default:
      return replaceMethod(s, args, kwargs);
  }
}

/** Python's `str.split(sep=None, maxsplit=-1)`, as the interpreter implements it. */
function split(s: string, args: unknown[]): string[] {
  const sep = args.length > 0 ? args[0] : null;
  if (!(typeof sep === 'string' || sep === null)) throw new Error('sep argument must be a string or null');
  const maxsplit = args.length > 1 ? args[1] : -1;
  if (typeof maxsplit !== 'number' || !Number.isInteger(maxsplit)) throw new Error('maxsplit argument must be a number');
  if (sep === null) {
    const result: string[] = [];
    const text = s.trimStart();
    for (const { 0: match, index } of text.matchAll(/\S+/g)) {
      if (maxsplit !== -1 && result.length >= maxsplit) {
        result.push(match + text.slice(index + match.length));
        break;
      }
      result.push(match);
    }
    return result;
  }
  if (sep === '') throw new Error('empty separator');
  const result = s.split(sep);
  if (maxsplit !== -1 && result.length > maxsplit) result.push(result.splice(maxsplit).join(sep));
  return result;
}

function replaceMethod(s: string, args: unknown[], kwargs: Kwargs): string {
  if (kwargs !== null && args.length !== 2) throw new NotCompiled('replace() keywords');
  const [oldValue, newValue] = args;
  if (args.length < 2 || typeof oldValue !== 'string' || typeof newValue !== 'string') throw new Error('replace() arguments must be strings');
  const count = kwargs !== null ? (kwargs.has('count') ? kwargs.get('count') : null) : args.length > 2 ? args[2] : null;
  if (!(count === null || (typeof count === 'number' && Number.isInteger(count)))) throw new Error('replace() count argument must be a number or null');
  if (count === 0) return s;
  let remaining = count === null || count < 0 ? Infinity : count;
  const pattern = oldValue.length === 0 ? /(?=)/gu : new RegExp(oldValue.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gu');
  return s.replaceAll(pattern, (match) => {
    if (remaining <= 0) return match;
    remaining--;
    return newValue;
  });
}

function pairs(o: Record<string, unknown>): unknown[][] {
  return Object.entries(o).map(([k, v]) => [k, v]);
}

function objectMethod(o: Record<string, unknown>, name: string, args: unknown[], kwargs: Kwargs): unknown {
  noKwargs(kwargs);
  switch (name) {
    case 'get': {
      const key = args[0];
      if (typeof key !== 'string') throw new Error('Object key must be a string');
      if (Object.hasOwn(o, key)) return o[key];
      return args.length > 1 ? args[1] : null;
    }
    case 'items':
      return pairs(o);
    case 'keys':
      return Object.keys(o);
    case 'values':
      return Object.values(o);
    default:
      throw new NotCompiled(`${name}()`);
  }
}

/** Filters written `x | name`. */
export const PLAIN_FILTERS = new Set(['safe', 'tojson', 'list', 'first', 'last', 'length', 'reverse', 'join', 'string', 'upper', 'lower', 'title', 'capitalize', 'trim', 'indent', 'int', 'abs', 'items', 'bool']);
/** Filters written `x | name(...)`. */
export const CALL_FILTERS = new Set(['tojson', 'join', 'default', 'int', 'selectattr', 'rejectattr', 'map']);

/** A list's items as the interpreter's `join` sees them: raw values, nulls empty. */
function joinable(items: readonly unknown[]): string[] {
  return items.map((x) => (x === null || x === undefined ? '' : rawString(x)));
}

/** `operand | name` (applyFilter, Identifier form). */
export function plainFilter(name: string, v: unknown): unknown {
  if (name === 'safe') return v;
  if (name === 'tojson') return toJson(v, NO_JSON_OPTIONS, 0, true);
  if (Array.isArray(v)) {
    switch (name) {
      case 'list':
        return v;
      case 'first':
      case 'last':
        // The interpreter returns a bare JS undefined for an empty list, which fails later: its error is the answer.
        if (v.length === 0) throw new NotCompiled('first/last of an empty list');
        return name === 'first' ? v[0] : v[v.length - 1];
      case 'length':
        return v.length;
      case 'reverse':
        return v.slice().reverse();
      case 'join':
        return joinable(v).join('');
      case 'string':
        return toJson(v, NO_JSON_OPTIONS, 0, false);
    }
    throw new Error(`Unknown ArrayValue filter: ${name}`);
  }
  if (typeof v === 'string') {
    switch (name) {
      case 'length':
        return v.length;
      case 'upper':
      case 'lower':
      case 'title':
      case 'capitalize':
        return stringMethod(v, name, [], null);
      case 'trim':
        return v.trim();
      case 'indent':
        return v
          .split('\n')
          .map((x, i) => (i === 0 || x.length === 0 ? x : '    ' + x))
          .join('\n');
      case 'join':
      case 'string':
        return v;
      case 'int': {
        const n = parseInt(v, 10);
        return Number.isNaN(n) ? 0 : n;
      }
    }
    throw new Error(`Unknown StringValue filter: ${name}`);
  }
  if (typeof v === 'number') {
    switch (name) {
      case 'abs':
        return Math.abs(v);
      case 'int':
        return Math.floor(v);
      case 'string':
        return String(v);
    }
    throw new Error(`Unknown NumericValue filter: ${name}`);
  }
  if (isPlainObject(v)) {
    switch (name) {
      case 'items':
        return pairs(v);
      case 'length':
        return Object.keys(v).length;
    }
    if (OBJECT_METHODS.has(name)) return objectMethod(v, name, [], null);
    throw new Error(`Unknown ObjectValue filter: ${name}`);
  }
  if (typeof v === 'boolean') {
    switch (name) {
      case 'bool':
        return v;
      case 'int':
        return v ? 1 : 0;
      case 'string':
        return v ? 'true' : 'false';
    }
    throw new Error(`Unknown BooleanValue filter: ${name}`);
  }
  throw new Error(`Cannot apply filter "${name}"`);
}

/** `operand | name(args)` (applyFilter, CallExpression form). */
export function callFilter(name: string, v: unknown, args: unknown[], kwargs: Map<string, unknown>): unknown {
  switch (name) {
    case 'tojson':
      return toJson(v, jsonOptions(kwargs), 0, true);
    case 'join': {
      let items: string[];
      if (typeof v === 'string') items = Array.from(v);
      else if (Array.isArray(v)) items = joinable(v);
      else throw new Error('Cannot apply filter "join"');
      const sep = args.length > 0 ? args[0] : kwargs.has('separator') ? kwargs.get('separator') : '';
      if (typeof sep !== 'string') throw new Error('separator must be a string');
      return items.join(sep);
    }
    case 'map':
      return mapAttribute(v, kwargs);
    case 'selectattr':
    case 'rejectattr':
      return selectAttr(v, args, name === 'selectattr');
    case 'default': {
      const fallback = args.length > 0 ? args[0] : '';
      const boolean = args.length > 1 ? args[1] : kwargs.has('boolean') ? kwargs.get('boolean') : false;
      if (typeof boolean !== 'boolean') throw new Error('`default` filter flag must be a boolean');
      return v === undefined || (boolean && !truthy(v)) ? fallback : v;
    }
    default: {
      const fallback = args.length > 0 ? args[0] : kwargs.has('default') ? kwargs.get('default') : 0;
      if (typeof v === 'string') {
        const n = parseInt(v, 10);
        return Number.isNaN(n) ? fallback : n;
      }
      if (typeof v === 'number') return v;
      if (typeof v === 'boolean') return v ? 1 : 0;
      throw new Error('Cannot apply filter "int"');
    }
  }
}

/** `selectattr("attr", "test", value)`: items whose attribute is present and passes (rejectattr: the others). */
function selectAttr(v: unknown, args: unknown[], select: boolean): unknown[] {
  if (!Array.isArray(v)) throw new Error('Cannot apply filter "selectattr"');
  if (v.some((item) => !(isPlainObject(item) || item instanceof Namespace))) throw new Error('`selectattr` can only be applied to array of objects');
  const [attr, testName, value] = args as string[];
  // Without an attribute, or `equalto` without a value, the interpreter reads a property of undefined.
  if (attr === undefined || ((testName === 'equalto' || testName === 'eq') && value === undefined)) throw new NotCompiled('selectattr arguments');
  let test: (a: unknown) => boolean = truthy;
  if (testName !== undefined) {
    if (testName === 'equalto' || testName === 'eq') test = (a) => a === value;
    else test = TESTS.get(testName) ?? unmodelledTest(testName);
  }
  return v.filter((item: unknown) => {
    const present = item instanceof Namespace ? item.entries.has(attr!) : Object.hasOwn(item as object, attr!);
    const a = item instanceof Namespace ? item.entries.get(attr!) : (item as Record<string, unknown>)[attr!];
    const result = present ? test(a) : false;
    return select ? result : !result;
  });
}

/** `map(attribute='a.b', default=d)`, the only form of `map` the interpreter has. */
function mapAttribute(v: unknown, kwargs: Map<string, unknown>): unknown[] {
  if (!Array.isArray(v)) throw new Error('Cannot apply filter "map"');
  if (!kwargs.has('attribute')) throw new Error('`map` expressions without `attribute` set are not currently supported.');
  const attr = kwargs.get('attribute');
  if (typeof attr !== 'string') throw new Error('attribute must be a string');
  const fallback = kwargs.get('default');
  return v.map((item: unknown) => {
    if (!(isPlainObject(item) || item instanceof Namespace)) throw new Error('items in map must be an object');
    const value = attributePath(item, attr);
    return value === undefined ? fallback : value;
  });
}

/** getAttributeValue: a dotted path through objects and (by index) lists; undefined where it breaks. */
function attributePath(item: unknown, path: string): unknown {
  let value = item;
  for (const part of path.split('.')) {
    if (value instanceof Namespace) value = value.entries.get(part);
    else if (isPlainObject(value)) value = Object.hasOwn(value, part) ? value[part] : undefined;
    else if (Array.isArray(value)) {
      const index = parseInt(part, 10);
      if (Number.isNaN(index) || index < 0 || index >= value.length) return undefined;
      value = value[index];
    } else return undefined;
  }
  return value;
}

function unmodelledTest(name: string): never {
  throw new NotCompiled(`test ${name}`);
}

function jsonOptions(kwargs: Map<string, unknown>): JsonOptions {
  const indent = kwargs.has('indent') ? kwargs.get('indent') : null;
  if (!(indent === null || (typeof indent === 'number' && Number.isInteger(indent)))) throw new Error('If set, indent must be a number');
  const ensureAscii = kwargs.has('ensure_ascii') ? kwargs.get('ensure_ascii') : false;
  if (typeof ensureAscii !== 'boolean') throw new Error('If set, ensure_ascii must be a boolean');
  const sortKeys = kwargs.has('sort_keys') ? kwargs.get('sort_keys') : false;
  if (typeof sortKeys !== 'boolean') throw new Error('If set, sort_keys must be a boolean');
  const sep = kwargs.has('separators') ? kwargs.get('separators') : null;
  let separators: [string, string] | null = null;
  if (Array.isArray(sep)) {
    const [a, b] = sep as unknown[];
    if (sep.length !== 2 || typeof a !== 'string' || typeof b !== 'string') throw new Error('separators must be a tuple of two strings');
    separators = [a, b];
  } else if (sep !== null) {
    throw new Error('If set, separators must be a tuple of two strings');
  }
  return { indent, ensureAscii, sortKeys, separators };
}

/** `x is name` (Environment.TESTS; `callable`, `equalto` and `eq` are left to the interpreter). */
export const TESTS: ReadonlyMap<string, (v: unknown) => boolean> = new Map<string, (v: unknown) => boolean>([
  ['boolean', (v) => typeof v === 'boolean'],
  ['odd', (v) => integer(v) % 2 !== 0],
  ['even', (v) => integer(v) % 2 === 0],
  ['false', (v) => v === false],
  ['true', (v) => v === true],
  ['none', (v) => v === null],
  ['string', (v) => typeof v === 'string'],
  ['number', (v) => typeof v === 'number'],
  ['integer', (v) => typeof v === 'number' && Number.isInteger(v)],
  ['mapping', (v) => isPlainObject(v)],
  ['sequence', (v) => Array.isArray(v) || isPlainObject(v) || typeof v === 'string'],
  ['lower', (v) => typeof v === 'string' && v === v.toLowerCase()],
  ['upper', (v) => typeof v === 'string' && v === v.toUpperCase()],
  ['defined', (v) => v !== undefined],
  ['undefined', (v) => v === undefined],
]);

function integer(v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new Error('cannot odd/even on a non-integer');
  return v;
}

/** The interpreter's globals besides true/false/none (setupGlobals and Environment); stateless, shared by every render. */
export function globalFunctions(): Map<string, unknown> {
  return new Map<string, unknown>([
    ['namespace', new NamespaceFunction()],
    ['raise_exception', new RaiseException()],
    ['range', new RangeFunction()],
  ]);
}

class NamespaceFunction extends Callable {
  call(args: unknown[], kwargs: Kwargs): Namespace {
    if (args.length > 1) throw new Error(`namespace expected at most 1 argument, got ${args.length}`);
    const entries = new Map<string, unknown>();
    if (args.length === 1) {
      const source = args[0];
      if (isPlainObject(source)) for (const [k, v] of Object.entries(source)) entries.set(k, v);
      else throw new NotCompiled('namespace() of a non-object');
    }
    if (kwargs !== null) for (const [k, v] of kwargs) entries.set(k, v);
    return new Namespace(entries);
  }
}

class RaiseException extends Callable {
  call(args: unknown[]): never {
    // The interpreter's message is the one reported: this render is redone by it.
    throw new Error(args.length > 0 && typeof args[0] === 'string' ? args[0] : 'raise_exception');
  }
}

class RangeFunction extends Callable {
  call(args: unknown[], kwargs: Kwargs): number[] {
    noKwargs(kwargs);
    if (args.length === 0 || args.length > 3 || !args.every((a) => typeof a === 'number' && Number.isInteger(a))) throw new NotCompiled('range() of non-integers');
    const [a, b, c] = args as number[];
    const start = b === undefined ? 0 : a!;
    const stop = b === undefined ? a! : b;
    const step = c ?? 1;
    if (step === 0) throw new Error('range() step must not be zero');
    const out: number[] = [];
    if (step > 0) for (let i = start; i < stop; i += step) out.push(i);
    else for (let i = start; i > stop; i += step) out.push(i);
    return out;
  }
}

