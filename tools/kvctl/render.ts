/**
 * kvctl's answers as text: one table per command, built from the decoded gRPC messages. Pure,
 * so the printed layout is unit-tested from fixed messages. Columns follow the spec's words
 * (kv-events §8/§10, discovery.md); "-" marks a value that does not exist (no load report yet).
 */
import type { WireListInstancesResponse, WireServedModels, WireViewInstance } from '../../shared/view/view-wire.js';
import type { WireGetStatsResponse, WireListStreamsResponse, WireQueryResponse, WireStreamStatus } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { formatKeyValues, formatTable, type Column } from './table.js';

const NONE = '-';

/** `gap:2 timeout:1`, classes in name order; '-' when nothing was lost. */
function syncLostText(byClass: Readonly<Record<string, string>>): string {
  const parts = Object.keys(byClass)
    .filter((k) => byClass[k] !== '0')
    .sort()
    .map((k) => `${k}:${byClass[k]}`);
  return parts.length === 0 ? NONE : parts.join(' ');
}

/**
 * Non-zero skip counts by reason (kv-events §10, engines.md §2, cache-identity §4), reasons in
 * name order, e.g. `group:12 multimodal:3`; '-' when nothing was skipped.
 */
function skippedText(c: WireStreamStatus['counters']): string {
  const byReason: ReadonlyArray<readonly [string, string]> = [
    ['descendant', c.skipped_descendant],
    ['group', c.skipped_group],
    ['medium', c.skipped_medium],
    ['multimodal', c.skipped_multimodal],
    ['orphan', c.skipped_orphan],
    ['out_of_scope', c.skipped_out_of_scope],
  ];
  const parts = byReason.filter(([, n]) => n !== '' && n !== '0').map(([reason, n]) => `${reason}:${n}`);
  return parts.length === 0 ? NONE : parts.join(' ');
}

/** 850ms, 12.3s, 4m05s: heartbeat ages and uptimes at a glance. */
export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const totalS = Math.floor(ms / 1000);
  if (totalS < 3600) return `${Math.floor(totalS / 60)}m${String(totalS % 60).padStart(2, '0')}s`;
  return `${Math.floor(totalS / 3600)}h${String(Math.floor((totalS % 3600) / 60)).padStart(2, '0')}m`;
}

const STREAM_COLUMNS: readonly Column[] = [
  { header: 'INSTANCE' },
  { header: 'DP', align: 'right' },
  { header: 'KIND' },
  { header: 'STATE' },
  { header: 'SEQ', align: 'right' },
  { header: 'DEVICE', align: 'right' },
  { header: 'HOST', align: 'right' },
  { header: 'ENTRIES', align: 'right' },
  { header: 'BATCHES', align: 'right' },
  { header: 'RECOVERIES', align: 'right' },
  { header: 'SYNC_LOST' },
  { header: 'SKIPPED' },
  { header: 'ERROR' },
];

function streamRow(s: WireStreamStatus): string[] {
  const c = s.counters;
  return [
    s.instance_name,
    String(s.dp_rank),
    // engines.md §1; an older directory sends none (proto default "").
    s.engine_kind === '' ? 'xllm' : s.engine_kind,
    s.state,
    s.sequence,
    s.device_blocks,
    s.host_blocks,
    s.entry_count,
    c.batches_applied,
    // ok/failed: a failed count that keeps growing is the first thing to look at.
    `${c.recoveries_ok}/${c.recoveries_failed}`,
    syncLostText(c.sync_lost),
    skippedText(c),
    s.error === '' ? NONE : s.error,
  ];
}

export function renderStreams(res: WireListStreamsResponse): string {
  if (res.streams.length === 0) return 'no streams\n';
  return formatTable(STREAM_COLUMNS, res.streams.map(streamRow));
}

const INSTANCE_COLUMNS: readonly Column[] = [
  { header: 'NAME' },
  { header: 'SOURCE' },
  { header: 'TYPE' },
  { header: 'ROLE' },
  { header: 'STATE' },
  { header: 'SCHEDULABLE' },
  { header: 'DP', align: 'right' },
  { header: 'INCARNATION' },
  { header: 'WAITING', align: 'right' },
  { header: 'GPU_CACHE', align: 'right' },
  { header: 'HEARTBEAT_AGE', align: 'right' },
  { header: 'MODELS' },
  { header: 'EXCLUDED' },
];

/**
 * cache-identity §1 at a glance: base models by name, LoRA adapters as `+name` (`+name(parent)`
 * when the parent is not the first base listed); `unknown` when the instance may serve any model.
 */
export function modelsText(models: WireServedModels | null | undefined): string {
  if (models === null || models === undefined) return 'unknown';
  const data = models.data ?? [];
  if (data.length === 0) return 'none';
  const base = data.find((m) => m.parent === '')?.name;
  return data.map((m) => (m.parent === '' ? m.name : m.parent === base ? `+${m.name}` : `+${m.name}(${m.parent})`)).join(' ');
}

function instanceRow(i: WireViewInstance): string[] {
  const load = i.load ?? null;
  const age = Number(i.heartbeat_age_ms ?? '-1');
  return [
    i.name,
    // "etcd", "engines_file", or "dns:<name>": which DNS name an engine was found through (engines.md §6); none from older directories.
    i.source === undefined || i.source === '' ? NONE : i.source,
    i.type,
    i.current_role === '' ? NONE : i.current_role,
    i.state,
    i.schedulable ? 'yes' : 'no',
    String(i.dp_size),
    i.incarnation_id === '' ? NONE : i.incarnation_id,
    load === null ? NONE : String(load.waiting_requests_num),
    load === null ? NONE : `${(load.gpu_cache_usage_perc * 100).toFixed(1)}%`,
    age < 0 ? NONE : durationText(age),
    modelsText(i.models),
    i.excluded_reason === undefined || i.excluded_reason === '' ? NONE : i.excluded_reason,
  ];
}

export function renderInstances(res: WireListInstancesResponse): string {
  // discovery.md: etcd down never stops routing; the table is the last one known.
  const etcd =
    res.etcd_disabled === true ? 'etcd: not used (--etcd_addr= empty)\n' : res.etcd_connected ? 'etcd: connected\n' : 'etcd: DISCONNECTED (last known instance table)\n';
  if (res.instances.length === 0) return `${etcd}no instances\n`;
  return etcd + formatTable(INSTANCE_COLUMNS, res.instances.map(instanceRow));
}

const QUERY_COLUMNS: readonly Column[] = [
  { header: 'INSTANCE' },
  { header: 'DP', align: 'right' },
  { header: 'SYNC' },
  { header: 'SEQ', align: 'right' },
  { header: 'DEVICE_HIT', align: 'right' },
  { header: 'HOST_ONLY_HIT', align: 'right' },
  { header: 'REUSABLE', align: 'right' },
  { header: 'DEVICE', align: 'right' },
  { header: 'HOST', align: 'right' },
  { header: 'ERROR' },
];

export function renderQuery(res: WireQueryResponse): string {
  const head = `input_tokens ${res.input_tokens}, block_size ${res.block_size === 0 ? '- (none or mixed)' : res.block_size}\n`;
  if (res.matches.length === 0) return `${head}no streams\n`;
  const rows = res.matches.map((m) => [
    m.instance_name,
    String(m.dp_rank),
    m.synchronized ? 'yes' : 'no',
    m.sequence,
    String(m.device_hit_tokens),
    String(m.host_only_hit_tokens),
    String(m.reusable_prefix_tokens),
    String(m.device_blocks),
    String(m.host_blocks),
    m.error === '' ? NONE : m.error,
  ]);
  return head + formatTable(QUERY_COLUMNS, rows);
}

export function renderStats(res: WireGetStatsResponse): string {
  const byState = Object.keys(res.streams_by_state)
    .sort()
    .map((k) => `${k}:${res.streams_by_state[k]}`)
    .join(' ');
  return formatKeyValues([
    ['directory_enabled', String(res.directory_enabled)],
    ['stream_source', res.stream_source === '' ? NONE : res.stream_source],
    ['streams_total', String(res.streams_total)],
    ['streams_synchronized', String(res.streams_synchronized)],
    ['streams_by_state', byState === '' ? NONE : byState],
    ['device_blocks_total', res.device_blocks_total],
    ['host_blocks_total', res.host_blocks_total],
    ['entries_total', res.entries_total],
    ['queries_total', res.queries_total],
    ['started_at', new Date(Number(res.started_at_ms)).toISOString()],
    ['uptime', durationText(Number(res.uptime_ms))],
    // The view stream: compare a router's applied version with view_version (absent from older directories).
    ['view_epoch', res.view_epoch === undefined || res.view_epoch === '' ? NONE : res.view_epoch],
    ['view_version', res.view_version ?? NONE],
    ['view_watchers', res.view_watchers === undefined ? NONE : String(res.view_watchers)],
  ]);
}
