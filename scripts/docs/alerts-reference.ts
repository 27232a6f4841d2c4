/**
 * The alerting rules the repository ships (any Prometheus rules file under `deploy/`: YAML with
 * `groups[].rules[].alert`, or a PrometheusRule with them under `spec`), listed from the files themselves. The alerts page keeps a hand-written
 * "what to do" section per alert; the docs test checks that every alert listed here has one, so a
 * new rule cannot ship without its runbook. Pure apart from reading the files.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parse } from 'yaml';
import { code, markdownTable } from './markdown-table.js';

export interface AlertRule {
  readonly file: string;
  readonly group: string;
  readonly alert: string;
  readonly expr: string;
  readonly for: string;
  readonly severity: string;
  readonly summary: string;
}

type RuleGroup = { name?: string; rules?: { alert?: string; expr?: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[] };

/** A Prometheus rules file, or a prometheus-operator PrometheusRule (the groups under `spec`). */
interface RuleFile {
  groups?: RuleGroup[];
  spec?: { groups?: RuleGroup[] };
}

/** Every alerting rule in YAML files under `deploy/`, in file and rule order. */
export function alertRules(root: string): AlertRule[] {
  const out: AlertRule[] = [];
  for (const file of yamlFiles(join(root, 'deploy'))) {
    const text = readFileSync(file, 'utf8');
    if (!/^\s*groups:/m.test(text) || !/\balert:/.test(text)) continue;
    for (const doc of text.split(/^---$/m)) {
      const parsed = parse(doc) as RuleFile | null;
      for (const g of parsed?.groups ?? parsed?.spec?.groups ?? []) {
        for (const r of g.rules ?? []) {
          if (r.alert === undefined) continue;
          out.push({
            file: relative(root, file),
            group: g.name ?? '',
            alert: r.alert,
            expr: String(r.expr ?? '').trim(),
            for: r.for ?? '0s',
            severity: r.labels?.['severity'] ?? '',
            summary: r.annotations?.['summary'] ?? r.annotations?.['description'] ?? '',
          });
        }
      }
    }
  }
  return out;
}

export function alertsMarkdown(rules: readonly AlertRule[]): string {
  if (rules.length === 0) {
    return 'No Prometheus alerting rules file is in `deploy/` at this commit: the signals below are the conditions to alert on, with the metric that shows each.';
  }
  const rows = rules.map((r) => [`[${r.alert}](#${r.alert.toLowerCase()})`, r.severity === '' ? '—' : r.severity, code(r.expr), r.for, r.summary, code(r.file)]);
  return markdownTable(['alert', 'severity', 'expression', 'for', 'summary', 'file'], rows);
}

function yamlFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const p = join(dir, entry);
    if (statSync(p).isDirectory()) out.push(...yamlFiles(p));
    else if (/\.ya?ml$/.test(entry)) out.push(p);
  }
  return out;
}
