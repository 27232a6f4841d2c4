// The directory's per-stream kv-events §10 metrics, end to end through the parts main.ts wires:
// a real StreamSubscriber (tracked by StreamMetrics inside the Directory's stream factory) fed by
// the engine simulator's RankPublisher over TCP ZeroMQ, scraped from the real directory HTTP
// server's GET /metrics.
//
//   RankPublisher XPUB ──[topic, seq, batch]──▶ StreamSubscriber ◀── StreamMetrics.collect()
//                 ROUTER ◀── snapshot ──────────┘                       ▲
//   test ── GET /metrics ──▶ DirectoryHttpServer ── registry.metrics() ─┘
import { expect } from 'chai';
import type { Registry } from 'prom-client';
import { Directory, type DirectoryStreamFactory } from '../../../directory-svc/directory.js';
import type { HeartbeatSink } from '../../../directory-svc/http/directory-http-server.js';
import { DirectoryHttpServer } from '../../../directory-svc/http/directory-http-server.js';
import { StreamMetrics } from '../../../directory-svc/metrics/stream-metrics.js';
import { StreamSubscriber } from '../../../directory-svc/subscription/stream-subscriber.js';
import { createMetricsRegistry } from '../../../shared/metrics/metrics-registry.js';
import { RankPublisher } from '../../../tools/engine-sim/rank-publisher.js';
import { freePort, waitFor } from '../../helpers/ports.js';
import { BASE_LIMITS, BLOCK_SIZE, chainTokens, replica, stored } from '../../helpers/stream-harness.js';

interface Series {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Prometheus text exposition → series (enough of the format for prom-client's output). */
function parseExposition(text: string): { series: Series[]; types: Map<string, string> } {
  const series: Series[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    series.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { series, types };
}

/** Heartbeats play no part here; the HTTP server only needs somewhere to send them. */
const noHeartbeats: HeartbeatSink = { heartbeat: () => 'unknown_instance', invalidReport: () => undefined };

const STREAM_SERIES = [
  'kv_batches_applied_total',
  'kv_topic_mismatch_total',
  'kv_skipped_total',
  'kv_sync_lost_total',
  'kv_recoveries_total',
  'kv_restores_total',
  'kv_silent_loss_total',
  'kv_reconcile_failures_total',
  'kv_stream_state',
  'kv_stream_in_state',
  'kv_stream_sequence',
  'kv_index_blocks',
  'kv_index_entries',
  'kv_index_bytes',
] as const;

describe('directory stream metrics (kv-events §10) on GET /metrics', () => {
  let pub: RankPublisher | null = null;
  let directory: Directory | null = null;
  let http: DirectoryHttpServer | null = null;
  let registry: Registry;

  beforeEach(async () => {
    registry = createMetricsRegistry({ processMetrics: false });
    const metrics = new StreamMetrics(registry);
    const createStream: DirectoryStreamFactory = (cfg, limits) => StreamSubscriber.create(cfg, limits);
    directory = new Directory({ enabled: true, streamSource: 'static', maxStreams: 8, limits: BASE_LIMITS, createStream, trackers: [metrics] });
    http = await DirectoryHttpServer.start({ port: 0, host: '127.0.0.1', internalApiToken: '', heartbeats: noHeartbeats, registry });
    pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 1, blockSize: BLOCK_SIZE, maxMessageBytes: 65_536 });
  });

  afterEach(async () => {
    await directory?.close();
    await http?.close();
    await pub?.close();
    directory = null;
    http = null;
    pub = null;
  });

  async function addSynchronizedStream(): Promise<void> {
    await directory!.addStream({
      instanceName: 'engine-a:8000',
      dpRank: 1,
      blockSize: BLOCK_SIZE,
      endpoint: pub!.eventEndpoint,
      replayEndpoint: pub!.replayEndpoint,
      topic: '',
      hashSeed: 1024,
    });
    await pub!.waitForSubscribers(1);
    await waitFor(() => directory!.listStreams()[0]?.synchronized, 5000, 'stream synchronized');
  }

  async function scrape(): Promise<{ series: Series[]; types: Map<string, string> }> {
    const res = await fetch(`http://127.0.0.1:${http!.port}/metrics`);
    expect(res.status).to.equal(200);
    return parseExposition(await res.text());
  }

  it('names every §10 counter and stream/index gauge with instance and dp_rank after a stream applies a batch', async () => {
    await addSynchronizedStream();
    // Two chained blocks in one batch (seq 0), the second also replicated to Host in a second batch.
    await pub!.publish([stored([11, 12], null, chainTokens(0, 2))]);
    await pub!.publish([replica([12], 'cpu')]);
    await waitFor(() => directory!.listStreams()[0]!.counters.batchesApplied === 2, 5000, 'two batches applied');

    const { series, types } = await scrape();
    const mine = series.filter((s) => s.labels['instance'] === 'engine-a:8000' && s.labels['dp_rank'] === '1');
    for (const name of STREAM_SERIES) {
      expect(mine.some((s) => s.name === name), `${name}{instance,dp_rank}`).to.equal(true);
      expect(types.get(name), `${name} type`).to.equal(name.endsWith('_total') ? 'counter' : 'gauge');
    }
    const value = (name: string, extra: Record<string, string> = {}): number | undefined =>
      mine.find((s) => s.name === name && Object.entries(extra).every(([k, v]) => s.labels[k] === v))?.value;

    expect(value('kv_batches_applied_total')).to.equal(2);
    expect(value('kv_stream_sequence')).to.equal(1);
    expect(value('kv_stream_state')).to.equal(3); // SYNCHRONIZED, the proto's StreamState number
    expect(value('kv_stream_in_state', { state: 'SYNCHRONIZED' })).to.equal(1);
    expect(value('kv_stream_in_state', { state: 'CONNECTING' })).to.equal(0);
    expect(value('kv_index_blocks', { tier: 'device' })).to.equal(2);
    expect(value('kv_index_blocks', { tier: 'host' })).to.equal(1);
    expect(value('kv_index_entries')).to.equal(3);
    expect(value('kv_index_bytes')).to.be.greaterThan(0);
    expect(value('kv_recoveries_total', { result: 'ok' })).to.equal(1);
    expect(value('kv_recoveries_total', { result: 'failed' })).to.equal(0);
    for (const reason of ['out_of_scope', 'descendant', 'orphan', 'multimodal', 'group']) expect(value('kv_skipped_total', { reason }), reason).to.equal(0);
    // Every §10 class is present from the first scrape, so the first loss of each is an increase.
    for (const cls of ['connecting', 'disconnected', 'parse', 'protocol', 'inconsistent', 'gap', 'seq_reset', 'timeout', 'limit', 'history_lost']) {
      expect(value('kv_sync_lost_total', { class: cls }), cls).to.be.a('number');
    }
  });

  it('CI3/CI4 kv_skipped_total{reason="multimodal"} and {reason="group"} count blocks of images and of groups the stream does not index', async () => {
    await addSynchronizedStream();
    const tokens = chainTokens(0, 3);
    await pub!.publish([
      // Block 0 text, blocks 1–2 an image: 2 multimodal.
      { ...stored([11, 12, 13], null, tokens), extra_keys: [null, [['img-1', 0]], [['img-1', -4]]] },
      // A sliding-window group beside group 0: 3 stores and 1 removal ignored.
      { ...stored([11, 12, 13], null, tokens), group_idx: 1, kv_cache_spec_kind: 'sliding_window' },
      { type: 'BlockRemoved', block_hashes: [11], medium: 'gpu', group_idx: 1 },
    ]);
    await waitFor(() => directory!.listStreams()[0]!.counters.batchesApplied === 1, 5000, 'batch applied');
    const { series } = await scrape();
    const skipped = (reason: string): number | undefined => series.find((s) => s.name === 'kv_skipped_total' && s.labels['instance'] === 'engine-a:8000' && s.labels['reason'] === reason)?.value;
    expect([skipped('multimodal'), skipped('group'), skipped('descendant')]).to.deep.equal([2, 4, 0]);
    expect(directory!.listStreams()[0]!.deviceBlocks).to.equal(1);
  });

  it('counts a foreign-topic message and a sequence gap at the next scrape, with no hook on the event path', async () => {
    await addSynchronizedStream();
    await pub!.publish([stored([11], null, chainTokens(0, 1))], { topic: 'other-topic' });
    pub!.dropNextBatch();
    await pub!.publish([stored([11], null, chainTokens(0, 1))]);
    await pub!.publish([stored([12], 11, chainTokens(1, 1))]);
    await waitFor(() => {
      const c = directory!.listStreams()[0]!.counters;
      return c.topicMismatch === 1 && (c.syncLost['gap'] ?? 0) >= 1;
    }, 5000, 'topic mismatch and gap counted');

    const { series } = await scrape();
    const find = (name: string, extra: Record<string, string> = {}): Series | undefined =>
      series.find((s) => s.name === name && s.labels['instance'] === 'engine-a:8000' && Object.entries(extra).every(([k, v]) => s.labels[k] === v));
    expect(find('kv_topic_mismatch_total')?.value).to.equal(1);
    expect(find('kv_sync_lost_total', { class: 'gap' })?.value).to.be.at.least(1);
  });

  it('removing a stream takes all of its series out of the next scrape', async () => {
    await addSynchronizedStream();
    const before = (await scrape()).series.filter((s) => s.labels['instance'] === 'engine-a:8000');
    expect(before.length).to.be.greaterThan(STREAM_SERIES.length);

    expect(await directory!.removeStream('engine-a:8000', 1)).to.equal(true);
    const after = (await scrape()).series.filter((s) => s.labels['instance'] === 'engine-a:8000');
    expect(after).to.deep.equal([]);
  });
});
