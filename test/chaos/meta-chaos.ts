/**
 * MetaService chaos (issue 28): faults in the middle of a big EVENT_BLOCK_SNAPSHOT, on real
 * meta-svc processes and a real redis-server, while other reporters keep sending deltas.
 *
 *   snapshot reporter S ──X0, D1, then X1 (big)──▶ replica A ──┐
 *   20 reporters ──1-block ADDs, to A or B (B when A is down)──▶ replica B ──┴──▶ redis-server (AOF, fsync always)
 *
 * Each scenario: S commits a base snapshot X0 and acknowledged deltas D1; the other reporters
 * start; S sends X1 (half of X0's keys plus new ones) to A, and the fault hits when the
 * snapshot reaches the named phase (its rows being staged, or its committed stage being landed,
 * offloaded-writes.ts). Then the checks:
 * - S's state, read on a live replica, is exactly its last committed snapshot plus the later
 *   acknowledged deltas (X0 ∪ D1 if X1 did not commit, X1 if it did; every URI with its version),
 *   once the replicas recovered by themselves (`recovery_s`: from the fault to that state);
 * - S resends X1 if it did not commit, sends D2, and its state is X1 ∪ D2;
 * - every ADD another reporter had acknowledged is readable (`lost_acked` = 0).
 * Faults: SIGKILL of A (B serves on; A restarted afterwards), Redis stopped and started on the
 * same port and data (both replicas answer SERVICE_NOT_READY meanwhile), or none (the big
 * snapshot under the deltas, also on SQLite).
 *
 * Run: node --import tsx test/chaos/meta-chaos-main.ts   (full form; META_CHAOS_SHORT=1 the short
 * one that test/integration/kvcm-meta.chaos.test.ts runs).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DEFAULT_META_CONFIG_JSON } from '../../meta-svc/config/default-meta-config.js';
import { MetaProcess } from '../helpers/meta-process.js';
import { RedisServer } from '../helpers/redis-server.js';

export interface MetaChaosOptions {
  /** Blocks of the base snapshot X0. */
  readonly baseBlocks: number;
  /** Blocks of the big snapshot X1 the fault hits. */
  readonly snapshotBlocks: number;
  /** Other reporters sending 1-block ADDs throughout. */
  readonly reporters: number;
  /** Blocks of S's delta runs D1 and D2. */
  readonly deltaBlocks: number;
  readonly recoverTimeoutMs: number;
  readonly log?: (line: string) => void;
}

export const SHORT_META_CHAOS: MetaChaosOptions = { baseBlocks: 1000, snapshotBlocks: 12000, reporters: 5, deltaBlocks: 40, recoverTimeoutMs: 60000 };
export const FULL_META_CHAOS: MetaChaosOptions = { baseBlocks: 20000, snapshotBlocks: 200000, reporters: 20, deltaBlocks: 200, recoverTimeoutMs: 180000 };

export type MetaFault = 'replica_sigkill_staging' | 'replica_sigkill_landing' | 'redis_restart_staging' | 'redis_restart_landing' | 'none';

export interface MetaChaosRow {
  readonly fault: MetaFault;
  readonly store: 'redis' | 'sqlite';
  readonly snapshot_blocks: number;
  /** The fault hit the snapshot in its named phase (false: it had already answered). */
  readonly hit_phase: boolean;
  /** What A answered the big snapshot: its code, or `connection_lost`. */
  readonly snapshot_answer: string;
  /** Whether X1 was committed when the dust settled (`new`) or not (`old`: X0 stands). */
  readonly committed: 'old' | 'new';
  /** S's state after the fault was exactly the committed snapshot plus the acknowledged deltas. */
  readonly reporter_exact: boolean;
  /** The same after S resent X1 (if needed) and sent D2. */
  readonly reporter_exact_after_retry: boolean;
  /** Seconds from the fault until S's state was exact again (none: from the snapshot's answer); null = never. */
  readonly recovery_s: number | null;
  readonly acked_deltas: number;
  readonly lost_acked: number;
  /** Other reporters' ADDs answered with anything but OK (retried by the load on the other replica). */
  readonly failed_requests: number;
  /** Other reporters' acknowledged ADDs per second before X1 was sent, and while it ran. */
  readonly adds_per_s_before: number;
  readonly adds_per_s_during: number;
  readonly snapshot_s: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- loosely typed response JSON
type Json = any;

const I = 'test_instance';
const L2 = 'ST_EVENT_REPORT_L2';
const NS = 'kvcm:{default}:';
/** Keys per lookup while reading a reporter's state. */
const READ_CHUNK = 20000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** POST; null when the connection failed (a killed replica). */
async function post(p: MetaProcess, rpc: string, body: string): Promise<Json | null> {
  try {
    const res = await fetch(`${p.url}/api/${rpc}`, { method: 'POST', body });
    if (res.status !== 200) return { header: { status: { code: `http_${res.status}` } } };
    return await res.json();
  } catch {
    return null;
  }
}

const code = (r: Json | null): string => (r === null ? 'connection_lost' : (r.header.status.code as string));

function report(host: string, events: unknown[]): string {
  return JSON.stringify({ instance_id: I, host_ip_port: host, storage_type: L2, events });
}

function snapshotBody(host: string, keys: readonly number[], tag: string): string {
  const blocks = keys.map((k) => `{"block_key":"${k}","medium":"gpu","specs":[{"name":"tp0","uri":"event_report://${tag}/${k}"}]}`);
  return `{"instance_id":"${I}","host_ip_port":"${host}","storage_type":"${L2}","events":[{"event_type":"EVENT_BLOCK_SNAPSHOT","block_snapshot":{"blocks":[${blocks.join(',')}]}}]}`;
}

function addEvents(keys: readonly number[], tag: string): unknown[] {
  return keys.map((k) => ({ event_type: 'EVENT_BLOCK_ADD', block_add: { block_key: String(k), medium: 'gpu', specs: [{ name: 'tp0', uri: `event_report://${tag}/${k}` }] } }));
}

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** The replicas and their store. Redis: persistent, two replicas; SQLite: one. */
export class MetaChaosCluster {
  readonly replicas: (MetaProcess | null)[];

  private constructor(
    readonly kind: 'redis' | 'sqlite',
    private readonly store: string,
    replicas: MetaProcess[],
    readonly redis: RedisServer | null,
    private readonly dir: string,
  ) {
    this.replicas = replicas;
  }

  static async start(kind: 'redis' | 'sqlite'): Promise<MetaChaosCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'meta-chaos-'));
    // The §8 default, but a snapshot may follow the previous one after 1 s (§7.8): a scenario
    // sends its base snapshot and its big one a few seconds apart.
    const config = { ...(JSON.parse(DEFAULT_META_CONFIG_JSON) as Record<string, unknown>), event_report: { snapshot_min_interval_ms: 1000 } };
    writeFileSync(join(dir, 'meta.json'), JSON.stringify(config));
    const redis = kind === 'redis' ? await RedisServer.start({ persistent: true }) : null;
    const store = redis !== null ? redis.url() : join(dir, 'kvcm.db');
    const cluster = new MetaChaosCluster(kind, store, [], redis, dir);
    await cluster.startReplica(0);
    if (redis !== null) await cluster.startReplica(1);
    return cluster;
  }

  /** A running replica, preferring `i`. */
  live(i = 0): MetaProcess {
    const p = this.replicas[i] ?? this.replicas.find((r) => r !== null);
    if (!p) throw new Error('no replica running');
    return p;
  }

  async killReplica(i: number): Promise<void> {
    const p = this.replicas[i];
    this.replicas[i] = null;
    await p?.kill();
  }

  async startReplica(i: number): Promise<void> {
    if (this.replicas[i] !== null && this.replicas[i] !== undefined) return;
    this.replicas[i] = await MetaProcess.start(this.store, [`--node_id=chaos-${i === 0 ? 'a' : 'b'}`, '--log_level=warn', `--meta_config_file=${join(this.dir, 'meta.json')}`]);
  }

  async close(): Promise<void> {
    await Promise.all(this.replicas.map((p) => p?.kill()));
    await this.redis?.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Other reporters' 1-block ADDs, back to back, each on its own keys; every acknowledged one is remembered. */
class DeltaLoad {
  private stopped = false;
  private loops: Promise<void>[] = [];
  /** Acknowledged ADDs: key → the URI it was added with (before its s_version). */
  readonly acked = new Map<number, string>();
  readonly ackedAt: number[] = [];
  failed = 0;

  constructor(
    private readonly cluster: MetaChaosCluster,
    private readonly scenario: number,
    private readonly reporters: number,
  ) {}

  start(): void {
    this.loops = Array.from({ length: this.reporters }, (_, r) => this.loop(r));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async loop(r: number): Promise<void> {
    const host = `10.7.${this.scenario}.${r}:1`;
    for (let seq = 0; !this.stopped; seq++) {
      const key = 500_000_000 + this.scenario * 10_000_000 + r * 100_000 + seq;
      const tag = `o${this.scenario}-${r}`;
      const replicas = this.cluster.replicas.length;
      let p: MetaProcess;
      try {
        p = this.cluster.live((r + seq) % replicas);
      } catch {
        await sleep(50);
        continue;
      }
      // A HEARTBEAT now and then keeps the reporter visible (ADDs never refresh last_seen, §7.5).
      const events = seq % 20 === 0 ? [...addEvents([key], tag), { event_type: 'EVENT_HEARTBEAT', heartbeat: {} }] : addEvents([key], tag);
      const res = await post(p, 'reportEvent', report(host, events));
      if (code(res) === 'OK') {
        this.acked.set(key, `event_report://${tag}/${key}`);
        this.ackedAt.push(Date.now());
      } else {
        this.failed++;
        await sleep(20);
      }
    }
  }

  ratePerS(fromMs: number, toMs: number): number {
    const n = this.ackedAt.filter((t) => t >= fromMs && t < toMs).length;
    return Math.round((n * 1000 * 10) / Math.max(1, toMs - fromMs)) / 10;
  }
}

/** The visible tp0 URI of each key (null: a miss), read in chunks with QT_BATCH_GET. */
async function visibleUris(p: MetaProcess, keys: readonly number[]): Promise<Map<number, string | null> | null> {
  const out = new Map<number, string | null>();
  for (let i = 0; i < keys.length; i += READ_CHUNK) {
    const chunk = keys.slice(i, i + READ_CHUNK);
    const r = await post(p, 'getCacheLocation', JSON.stringify({ instance_id: I, block_keys: chunk, query_type: 'QT_BATCH_GET' }));
    if (code(r) !== 'OK') return null;
    chunk.forEach((k, j) => {
      const loc = r.locations[j];
      out.set(k, loc.type === 'ST_UNSPECIFIED' ? null : (loc.location_specs[0]?.uri ?? null));
    });
  }
  return out;
}

/** Keys whose visible URI differs from `expected` (absent = must be a miss). */
async function mismatches(p: MetaProcess, universe: readonly number[], expected: ReadonlyMap<number, string>): Promise<number> {
  const seen = await visibleUris(p, universe);
  if (seen === null) return universe.length;
  let bad = 0;
  for (const k of universe) if ((seen.get(k) ?? null) !== (expected.get(k) ?? null)) bad++;
  return bad;
}

function stamped(keys: readonly number[], tag: string, version: string, into = new Map<number, string>()): Map<number, string> {
  for (const k of keys) into.set(k, `event_report://${tag}/${k}?s_version=${version}`);
  return into;
}

/** Retries `fn` until it answers OK (or the deadline); the last answer. */
async function untilOk(fn: () => Promise<Json | null>, deadlineMs: number): Promise<Json | null> {
  let last: Json | null = null;
  while (Date.now() < deadlineMs) {
    last = await fn();
    if (code(last) === 'OK') return last;
    await sleep(250);
  }
  return last;
}

/** Polls Redis until the snapshot of `host` is in `phase`; false when the snapshot answered first. */
async function reachPhase(redis: RedisServer, host: string, phase: 'staging' | 'landing', answered: () => boolean): Promise<boolean> {
  const watcher = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await watcher.connect();
  const repKey = `${I}\u00008\u0000${host}`;
  try {
    while (!answered()) {
      if (phase === 'staging') {
        // A stage of this reporter exists (older scenarios' leftovers belong to other reporters).
        if (Object.values(await watcher.hgetall(`${NS}stages`)).includes(repKey)) return true;
      } else {
        const text = await watcher.hget(`${NS}rep`, repKey);
        if (text !== null && (JSON.parse(text) as { applying?: string }).applying) return true;
      }
      await sleep(2);
    }
    return false;
  } finally {
    watcher.disconnect();
  }
}

/** One scenario on a running cluster; `n` keeps its hosts and keys apart from the others'. */
export async function runMetaChaosScenario(cluster: MetaChaosCluster, fault: MetaFault, n: number, opts: MetaChaosOptions): Promise<MetaChaosRow> {
  const log = opts.log ?? (() => undefined);
  const host = `10.8.${n}.1:1`;
  const a = cluster.live(0);
  const base = n * 10_000_000;
  const x0 = range(base, opts.baseBlocks);
  const d1 = range(base + opts.baseBlocks, opts.deltaBlocks);
  // X1 keeps the second half of X0 and D1's keys, and adds new ones.
  const x1 = range(base + Math.floor(opts.baseBlocks / 2), opts.snapshotBlocks);
  const d2 = range(base + 50_000_000, opts.deltaBlocks);
  const universe = [...new Set([...x0, ...d1, ...x1, ...d2])];

  // Setup, retried while a replica restarted by the previous scenario settles.
  const setupBy = Date.now() + 30000;
  const setup = async (what: string, body: string): Promise<Json> => {
    const r = await untilOk(() => post(a, 'reportEvent', body), setupBy);
    if (code(r) !== 'OK') throw new Error(`scenario ${fault}: ${what} answered ${code(r)}: ${JSON.stringify(r?.header ?? null)}`);
    return r;
  };
  await setup('REGISTER', report(host, [{ event_type: 'EVENT_NODE_REGISTER', node_register: { mediums: ['gpu'] } }]));
  const v0 = (await setup('the base snapshot', snapshotBody(host, x0, `s0-${n}`))).committed_snapshot_version as string;
  await setup('D1', report(host, addEvents(d1, `d1-${n}`)));
  const before = stamped(d1, `d1-${n}`, v0, stamped(x0, `s0-${n}`, v0));

  const body = snapshotBody(host, x1, `s1-${n}`);
  const load = new DeltaLoad(cluster, n, opts.reporters);
  load.start();
  await sleep(1500);
  const t0 = Date.now();
  let answered = false;
  const snap = post(a, 'reportEvent', body).finally(() => (answered = true));
  let faultAt = 0;
  let hitPhase = fault === 'none';
  if (fault !== 'none') {
    const redis = cluster.redis as RedisServer;
    const phase = fault.endsWith('staging') ? 'staging' : 'landing';
    hitPhase = await reachPhase(redis, host, phase, () => answered);
    if (!hitPhase) log(`${fault}: the snapshot answered before ${phase}; fault injected after it`);
    faultAt = Date.now();
    if (fault.startsWith('replica_sigkill')) await cluster.killReplica(0);
    else await redis.restart();
    log(`${fault}: injected after ${faultAt - t0} ms`);
  }
  const answer = await snap;
  const answeredAt = Date.now();
  const p = cluster.live(1);
  const deadline = Date.now() + opts.recoverTimeoutMs;
  // The committed version, from a HEARTBEAT (it also keeps S visible, §7.9).
  const hb = await untilOk(() => post(p, 'reportEvent', report(host, [{ event_type: 'EVENT_HEARTBEAT', heartbeat: {} }])), deadline);
  const version = (hb?.committed_snapshot_version ?? '') as string;
  const committed = version !== v0 ? 'new' : 'old';
  if (code(answer) === 'OK' && committed === 'old') log(`${fault}: an acknowledged snapshot is not committed`);
  const expected = committed === 'new' ? stamped(x1, `s1-${n}`, version) : before;
  let recoveredAt: number | null = null;
  const heartbeat = report(host, [{ event_type: 'EVENT_HEARTBEAT', heartbeat: {} }]);
  while (Date.now() < deadline) {
    await post(p, 'reportEvent', heartbeat);
    if ((await mismatches(p, universe, expected)) === 0) {
      recoveredAt = Date.now();
      break;
    }
    await sleep(500);
  }

  // S resends X1 if it did not commit (SNAPSHOT_IN_PROGRESS while a dead replica's gate lasts), then D2.
  let v1 = version;
  if (committed === 'old') v1 = ((await untilOk(() => post(cluster.live(1), 'reportEvent', body), deadline))?.committed_snapshot_version ?? '') as string;
  const d2Answer = await untilOk(() => post(cluster.live(1), 'reportEvent', report(host, addEvents(d2, `d2-${n}`))), deadline);
  const after = stamped(d2, `d2-${n}`, v1, stamped(x1, `s1-${n}`, v1));
  await post(cluster.live(1), 'reportEvent', heartbeat);
  const exactAfterRetry = code(d2Answer) === 'OK' && (await mismatches(cluster.live(1), universe, after)) === 0;

  await load.stop();
  if (fault.startsWith('replica_sigkill')) await cluster.startReplica(0);
  // Every acknowledged ADD of the other reporters, read on every replica.
  let lost = 0;
  for (const r of cluster.replicas) {
    if (r === null) continue;
    const keys = [...load.acked.keys()];
    const seen = await visibleUris(r, keys);
    for (const k of keys) if (!(seen?.get(k) ?? '').startsWith(load.acked.get(k) as string)) lost++;
  }
  return {
    fault,
    store: cluster.kind,
    snapshot_blocks: opts.snapshotBlocks,
    hit_phase: hitPhase,
    snapshot_answer: code(answer),
    committed,
    reporter_exact: recoveredAt !== null,
    reporter_exact_after_retry: exactAfterRetry,
    recovery_s: recoveredAt === null ? null : Math.round((recoveredAt - (faultAt || answeredAt)) / 100) / 10,
    acked_deltas: load.acked.size,
    lost_acked: lost,
    failed_requests: load.failed,
    adds_per_s_before: load.ratePerS(t0 - 1000, t0),
    adds_per_s_during: load.ratePerS(t0, answeredAt),
    snapshot_s: Math.round((answeredAt - t0) / 100) / 10,
  };
}

/** Every scenario, Redis faults first, then the fault-free runs on both stores. */
export async function runMetaChaos(opts: MetaChaosOptions, faults: readonly MetaFault[] = ['replica_sigkill_staging', 'replica_sigkill_landing', 'redis_restart_staging', 'redis_restart_landing', 'none']): Promise<MetaChaosRow[]> {
  const rows: MetaChaosRow[] = [];
  const redis = await MetaChaosCluster.start('redis');
  try {
    for (const [i, f] of faults.entries()) rows.push(await runMetaChaosScenario(redis, f, i + 1, opts));
  } finally {
    await redis.close();
  }
  if (faults.includes('none')) {
    const sqlite = await MetaChaosCluster.start('sqlite');
    try {
      rows.push(await runMetaChaosScenario(sqlite, 'none', 9, opts));
    } finally {
      await sqlite.close();
    }
  }
  return rows;
}

export function metaChaosMarkdown(rows: readonly MetaChaosRow[]): string {
  const head = '| fault | store | snapshot blocks | fault hit its phase | snapshot answer | committed | state exact after fault | recovery s | exact after retry + D2 | acked deltas | lost acked | failed requests | ADDs/s before | ADDs/s during | snapshot s |';
  const sep = '|---|---|---:|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|';
  const lines = rows.map(
    (r) =>
      `| ${r.fault} | ${r.store} | ${r.snapshot_blocks} | ${r.fault === 'none' ? '-' : r.hit_phase ? 'yes' : 'no'} | ${r.snapshot_answer} | ${r.committed} | ${r.reporter_exact ? 'yes' : 'NO'} | ${r.recovery_s ?? 'NOT RECOVERED'} | ${r.reporter_exact_after_retry ? 'yes' : 'NO'} | ${r.acked_deltas} | ${r.lost_acked} | ${r.failed_requests} | ${r.adds_per_s_before} | ${r.adds_per_s_during} | ${r.snapshot_s} |`,
  );
  return [head, sep, ...lines].join('\n');
}
