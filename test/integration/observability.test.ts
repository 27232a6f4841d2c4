// The observability assets against the services as they run (issue 30 item 5): each service's live
// `/metrics` (directory-svc, router-svc, meta-svc as real processes with traffic through them)
// passes `promtool check metrics` apart from prom-client's own process metrics; the Prometheus
// rules pass `promtool check rules`; and every metric the rules and the Grafana dashboard name is
// one a live /metrics exports (or one the rules record).
//
//   SimProcess ── directory-svc ══ router-svc ◀── completions, routes      meta-svc ◀── an RPC
//        each GET /metrics ──▶ promtool check metrics; names ──▶ rules + dashboard expressions
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { parse } from 'yaml';
import { LiveMetricsStack, type ServiceName } from '../helpers/live-metrics.js';
import { promqlMetricNames } from '../helpers/promql-names.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OBSERVABILITY = join(ROOT, 'deploy/kubernetes/observability');
const RULES_FILE = join(OBSERVABILITY, 'kv-cache-router.rules.yml');
const DASHBOARD_FILE = join(OBSERVABILITY, 'kv-cache-router.dashboard.json');


/** prom-client's default process metrics, bare and with the router's `router_` prefix. */
function defaultMetricNames(): Set<string> {
  const names = new Set<string>();
  for (const prefix of ['', 'router_']) {
    const r = new Registry();
    collectDefaultMetrics({ register: r, prefix });
    for (const m of r.getMetricsAsArray()) names.add(m.name);
  }
  return names;
}

/** `promtool check metrics` on an exposition text: each finding line, by metric name. */
function promtoolFindings(text: string): { name: string; line: string }[] {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (run.error !== undefined) throw new Error(`promtool: ${run.error.message} (Debian package prometheus; scripts/setup.mjs --promtool installs it)`);
  // Exit 0: clean, 3: lint findings (listed); anything else is promtool failing to read the text.
  expect([0, 3], `promtool exit ${run.status}: ${run.stderr}`).to.include(run.status);
  return `${run.stdout}\n${run.stderr}`
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => ({ name: line.split(' ')[0]!, line }));
}

/** Names a live exposition text exports (`# TYPE`), a histogram's series names included. */
function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]!);
    if (m[2] === 'histogram' || m[2] === 'summary') for (const s of ['_bucket', '_sum', '_count']) names.add(`${m[1]}${s}`);
  }
  return names;
}

interface RuleFile {
  groups: { name: string; rules: { record?: string; alert?: string; expr: string }[] }[];
}

interface DashboardPanel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: DashboardPanel[];
}

function dashboardExprs(panels: readonly DashboardPanel[]): { title: string; expr: string }[] {
  return panels.flatMap((p) => [
    ...(p.targets ?? []).filter((t) => typeof t.expr === 'string').map((t) => ({ title: p.title ?? '', expr: t.expr! })),
    ...dashboardExprs(p.panels ?? []),
  ]);
}

describe('observability: live /metrics, Prometheus rules and the Grafana dashboard', function () {
  this.timeout(240000);
  let stack: LiveMetricsStack;
  let texts: Record<ServiceName, string>;

  before(async () => {
    stack = await LiveMetricsStack.start();
    texts = await stack.texts();
  });

  after(async () => {
    await stack?.close();
  });

  it('promtool check metrics flags a badly named metric (the check below can fail)', () => {
    const findings = promtoolFindings('# HELP kv_bad_total a gauge named like a counter\n# TYPE kv_bad_total gauge\nkv_bad_total 1\n');
    expect(findings.map((f) => f.name)).to.include('kv_bad_total');
  });

  for (const service of ['directory-svc', 'router-svc', 'meta-svc'] as const) {
    it(`promtool check metrics finds nothing in ${service}'s live /metrics beyond prom-client's own process metrics`, () => {
      const builtIn = defaultMetricNames();
      expect(texts[service]).to.match(/^# TYPE /m);
      const ours = promtoolFindings(texts[service]).filter((f) => !builtIn.has(f.name));
      expect(ours.map((f) => f.line)).to.deep.equal([]);
    });
  }

  it('promtool check rules passes on the rules file', () => {
    const run = spawnSync('promtool', ['check', 'rules', RULES_FILE], { encoding: 'utf8' });
    expect(run.error, 'promtool runs').to.equal(undefined);
    expect(run.status, `${run.stdout}${run.stderr}`).to.equal(0);
  });

  it('the rules alert on what an operator must know: unsynchronized streams, a stale router view, engines-file and DNS errors, a collapsed hit ratio, meta-svc not ready', () => {
    const rules = parse(readFileSync(RULES_FILE, 'utf8')) as RuleFile;
    const alerts = new Map(rules.groups.flatMap((g) => g.rules.filter((r) => r.alert !== undefined).map((r) => [r.alert!, r.expr] as const)));
    const wants: [string, string][] = [
      ['KvStreamUnsynchronized', 'kv_stream_state'],
      ['KvRouterViewStale', 'router_view_stale_seconds'],
      ['KvEnginesFileErrors', 'kv_engines_file_errors_total'],
      ['KvEnginesDnsErrors', 'kv_engines_dns_errors_total'],
      ['KvHitRatioCollapsed', 'policy:router_decision_kv_hit_ratio:mean5m'],
      ['KvMetaNotReady', 'kvcm_ready'],
    ];
    for (const [alert, metric] of wants) {
      expect(alerts.has(alert), `alert ${alert}`).to.equal(true);
      expect(promqlMetricNames(alerts.get(alert)!), `${alert} reads ${metric}`).to.include(metric);
    }
  });

  it('every metric the rules and the dashboard name is exported by a live /metrics or recorded by the rules', () => {
    const live = new Set(Object.values(texts).flatMap((t) => [...exportedNames(t)]));
    const rules = parse(readFileSync(RULES_FILE, 'utf8')) as RuleFile;
    const recorded = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => (r.record === undefined ? [] : [r.record]))));
    const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as { panels: DashboardPanel[] };
    const uses = [
      ...rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `rules ${r.alert ?? r.record}`, expr: r.expr }))),
      ...dashboardExprs(dashboard.panels).map((d) => ({ where: `dashboard "${d.title}"`, expr: d.expr })),
    ];
    expect(uses.length, 'expressions found').to.be.greaterThan(30);
    const missing: string[] = [];
    for (const { where, expr } of uses) {
      const names = promqlMetricNames(expr);
      expect(names.length, `${where}: ${expr} names a metric`).to.be.greaterThan(0);
      for (const name of names) {
        if (live.has(name) || recorded.has(name)) continue;
        missing.push(`${where}: ${name}`);
      }
    }
    expect(missing).to.deep.equal([]);
  });
});
