/**
 * Compact, exact text of a parsed JSON value (nulls kept, numbers as their source text): how
 * opaque config JSON such as a group's `extra_info` is echoed (kvcm-meta §4.2, §8).
 */
import { JsonNumber } from './json-parse.js';
import type { JsonValue } from './json-parse.js';

export function jsonTextOf(v: JsonValue): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return JSON.stringify(v);
  if (v instanceof JsonNumber) return v.raw;
  if (Array.isArray(v)) return `[${v.map(jsonTextOf).join(',')}]`;
  const parts: string[] = [];
  for (const [k, val] of v) parts.push(`${JSON.stringify(k)}:${jsonTextOf(val)}`);
  return `{${parts.join(',')}}`;
}
