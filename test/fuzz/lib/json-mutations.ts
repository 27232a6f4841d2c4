// JSON token-level mutations (delete, duplicate, swap, replace, splice, nesting) and structural
// ones that keep the text valid JSON, so both the grammar and the readers behind it are reached.
import { mutateBytes } from './byte-mutations.js';
import type { Rng } from './rng.js';

const JSON_TOKEN_RE = /"(?:[^"\\]|\\.)*"?|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[{}[\]:,]|\s+|./gsu;

/** Splits JSON text into tokens (strings, numbers, literals, punctuation, whitespace, other). */
export function jsonTokens(text: string): string[] {
  return text.match(JSON_TOKEN_RE) ?? [];
}

/** Tokens on the edges of what the project's JSON readers accept. */
const INTERESTING_JSON = [
  '0', '-0', '1', '-1', '1.5', '1e2', '1E+2', '1e999', '-1e999', '0.0000001', '2147483647', '2147483648', '-2147483649',
  '9007199254740993', '9223372036854775807', '9223372036854775808', '-9223372036854775809', '18446744073709551616',
  '"9223372036854775808"', '"-1"', '"1.0"', '" 1"', '""', '"\\u0000"', '"\\ud800"', '"\\udc00\\ud800"', '"\\uZZZZ"',
  '"__proto__"', '"constructor"', 'null', 'true', 'false', '[]', '{}', '[null]', '{"":null}', '"QT_PREFIX_MATCH"',
  '"gpu"', '"cpu"', 'NaN', 'Infinity', '01', '.5', '+1', '"\\"', '\u2028', '\ufeff',
];

const VALUE_TOKEN_RE = /^(?:"|-?\d|true$|false$|null$)/;

/** Values a structural mutation puts in place of another (types, bounds, nesting). */
function interestingValue(rng: Rng): unknown {
  const raw = rng.pick(INTERESTING_JSON);
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw; // as a string: the token itself was not valid JSON
  }
}

/** Object keys of the corpus in snake_case and lowerCamelCase, so both spellings meet (§1.3). */
function camel(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/**
 * One structural mutation of a parsed JSON value that keeps the text valid JSON: replace a value
 * (type, bound), drop or duplicate-in-camelCase a key, wrap a value in an array or an object,
 * empty or grow an array. Returns the serialized text.
 */
export function mutateJsonValue(rng: Rng, text: string): string | null {
  let root: unknown;
  try {
    root = JSON.parse(text) as unknown;
  } catch {
    return null;
  }
  // Every container and the key/index of each value in it.
  const slots: { parent: Record<string, unknown> | unknown[]; key: string | number }[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (depth > 20 || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && i < 64; i++) {
        slots.push({ parent: v, key: i });
        walk(v[i], depth + 1);
      }
    } else {
      for (const k of Object.keys(v)) {
        slots.push({ parent: v as Record<string, unknown>, key: k });
        walk((v as Record<string, unknown>)[k], depth + 1);
      }
    }
  };
  walk(root, 0);
  if (slots.length === 0) return JSON.stringify(interestingValue(rng));
  const n = 1 + rng.int(3);
  for (let k = 0; k < n; k++) {
    const { parent, key } = rng.pick(slots);
    const get = (): unknown => (parent as Record<string | number, unknown>)[key];
    const set = (v: unknown): void => {
      (parent as Record<string | number, unknown>)[key] = v;
    };
    switch (rng.int(6)) {
      case 0:
      case 1:
        set(interestingValue(rng));
        break;
      case 2:
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key as string];
        break;
      case 3:
        if (!Array.isArray(parent) && typeof key === 'string' && camel(key) !== key) parent[camel(key)] = get();
        else set([get()]);
        break;
      case 4:
        set(rng.chance(0.5) ? [get(), get()] : { value: get() });
        break;
      default: {
        const v = get();
        if (Array.isArray(v)) set(rng.chance(0.5) ? [] : Array.from({ length: rng.pick([2, 100, 5000]) }, () => v[0] ?? 0));
        else if (typeof v === 'number') set(rng.pick([v + 1, -v, v * 2 ** 31, v + 0.5, 2 ** 53 + 1]));
        else if (typeof v === 'string') set(rng.pick(['', v + v, v.toUpperCase(), v.slice(1), `${v}\u0000`, v.repeat(200)]));
        else set(interestingValue(rng));
      }
    }
  }
  return JSON.stringify(root);
}

/**
 * Half structural (valid JSON, bad values), half token-level (delete, duplicate, swap, replace,
 * splice, nest), sometimes a byte mutation on top.
 */
export function mutateJsonText(rng: Rng, text: string, donors: readonly string[] = []): string {
  if (rng.chance(0.5)) {
    const structural = mutateJsonValue(rng, text);
    if (structural !== null) return structural;
  }
  let toks = jsonTokens(text);
  const n = 1 + rng.int(3);
  for (let k = 0; k < n; k++) {
    if (toks.length === 0) toks = [rng.pick(INTERESTING_JSON)];
    const i = rng.int(toks.length);
    switch (rng.int(8)) {
      case 0:
        toks.splice(i, 1);
        break;
      case 1:
        toks.splice(i, 0, toks[i]!);
        break;
      case 2: {
        const j = rng.int(toks.length);
        [toks[i], toks[j]] = [toks[j]!, toks[i]!];
        break;
      }
      case 3:
      case 4: {
        // mostly a value for a value, so the text often stays JSON
        const values = toks.flatMap((t, at) => (VALUE_TOKEN_RE.test(t) ? [at] : []));
        toks[values.length > 0 && rng.chance(0.8) ? rng.pick(values) : i] = rng.pick(INTERESTING_JSON);
        break;
      }
      case 5: {
        const donor = donors.length > 0 ? jsonTokens(rng.pick(donors)) : toks;
        const from = rng.int(donor.length);
        toks.splice(i, rng.int(4), ...donor.slice(from, from + 1 + rng.int(12)));
        break;
      }
      case 6: {
        // wrap a token in deep nesting (depth limits, recursion)
        const depth = rng.pick([1, 2, 99, 100, 101, 1000, 5000]);
        const open = rng.chance(0.5) ? '[' : '{"a":';
        const close = open === '[' ? ']' : '}';
        toks[i] = open.repeat(depth) + toks[i]! + (rng.chance(0.9) ? close.repeat(depth) : '');
        break;
      }
      default: {
        // a mutation inside a string or number token, at the character level
        const t = toks[i]!;
        const at = rng.int(t.length + 1);
        const ch = rng.pick(['\\', '"', '\u0000', '\u001f', 'é', '\ud83d\ude00', '\ud800', 'e', '.', '-', '9']);
        toks[i] = t.slice(0, at) + ch + t.slice(at + (rng.chance(0.5) ? 1 : 0));
      }
    }
  }
  let out = toks.join('');
  if (rng.chance(0.1)) {
    const b = mutateBytes(rng, new TextEncoder().encode(out));
    out = new TextDecoder().decode(b);
  }
  return out;
}
