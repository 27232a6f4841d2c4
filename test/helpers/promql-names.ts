/**
 * The metric names a PromQL expression selects, for checking rules and dashboards against what the
 * services export. Not a PromQL parser (no npm package ships one we have installed; the official
 * grammar is @prometheus-io/lezer-promql): it drops what cannot hold a metric name (strings, label
 * matchers `{...}`, ranges `[...]`, grouping label lists) and keeps the identifiers that are not
 * keywords and not calls. Enough for the expressions we write; `promtool check rules` checks the
 * syntax itself.
 */

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan', 'atan2']);

/** Distinct metric (or recorded series) names in `expr`, in order of appearance. */
export function promqlMetricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const out: string[] = [];
  for (const m of bare.matchAll(/(?<![\w.:$])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()/g)) {
    const name = m[0];
    if (KEYWORDS.has(name.toLowerCase()) || out.includes(name)) continue;
    out.push(name);
  }
  return out;
}
