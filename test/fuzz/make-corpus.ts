// Writes the fuzz corpus under test/fuzz/corpus/ (valid seeds only; the fuzzer mutates them).
// Run once after changing a seed: `node --import tsx test/fuzz/make-corpus.ts`. The files are
// committed, so a seed and iteration number reproduce the same input on every machine.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encode } from '@msgpack/msgpack';
import { BlockPool } from '../../tools/engine-sim/block-pool.js';
import { WireEncoder, encodeSnapshotChunks } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent, WireSnapshotBlock } from '../../tools/engine-sim/wire-types.js';
import { DEFAULT_META_CONFIG_JSON } from '../../meta-svc/config/default-meta-config.js';
import { CORPUS_ROOT } from './lib/corpus.js';

const enc = new WireEncoder();
const TS = 1700000000.5;

function write(kind: string, name: string, data: Uint8Array | string): void {
  const dir = join(CORPUS_ROOT, kind);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), data);
}

function batch(events: readonly WireEvent[], dpRank: number | null = 0): Uint8Array {
  return enc.encodeBatch(TS, events.map((e) => enc.encodeEvent(e)), dpRank);
}

function toks(first: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => first + i);
}

for (const kind of ['live-batch', 'snapshot-chunk', 'heartbeat', 'meta-request', 'kv-events-config', 'meta-config', 'router-body', 'flags']) {
  rmSync(join(CORPUS_ROOT, kind), { recursive: true, force: true });
}

// ---- live batches (kv-events §3): array and map batches, map and positional events ----------
const stored = (hashes: (number | bigint | Uint8Array)[], parent: number | bigint | null, tokens: number[], medium: string | null = 'gpu'): WireEvent => ({
  type: 'BlockStored',
  block_hashes: hashes,
  parent_block_hash: parent,
  token_ids: tokens,
  block_size: 4,
  medium,
});
write('live-batch', '01-spec-positional.bin', batch([['BlockStored', [11, 12], null, toks(1, 8), 4, null, 'gpu']]));
write('live-batch', '02-spec-map-event.bin', batch([stored([11, 12], null, toks(1, 8))]));
write('live-batch', '03-spec-map-batch.bin', encode({ ts: TS, events: [{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: toks(1, 8), block_size: 4, medium: 'gpu' }], data_parallel_rank: 0 }));
write('live-batch', '04-removed-cleared.bin', batch([{ type: 'BlockRemoved', block_hashes: [12], medium: 'gpu' }, { type: 'AllBlocksCleared', medium: 'cpu' }, ['AllBlocksCleared']]));
write('live-batch', '05-tokenless-cpu.bin', batch([stored([11, 12], null, [], 'cpu')]));
write('live-batch', '06-hash-forms.bin', batch([stored([0xfffffffffffffffen, -2n, Uint8Array.of(0x12, 0x34), new Uint8Array(16)], null, toks(1, 16), 'GPU')]));
write('live-batch', '07-lora-extra-keys.bin', batch([{ type: 'BlockStored', block_hashes: [21], parent_block_hash: 11, token_ids: toks(9, 4), block_size: 4, lora_id: 3, lora_name: 'adapter', extra_keys: [[1, 'x']], medium: 'gpu', group_idx: 0 }]));
write('live-batch', '08-empty-batch.bin', batch([]));
// Positions 3–4 of BlockRemoved are group_idx and locality (cache-identity §4); 'extra' is past them.
write('live-batch', '09-positional-removed.bin', batch([['BlockRemoved', [11], 'cpu', 0, null, 'extra'], ['BlockStored', [13], 12, [], null, null, 'cpu', null, null]]));
{
  // A realistic step from the simulator: chained stores, an eviction and an offload.
  const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 6, hostCapacityBlocks: 4 });
  pool.admitPrompt(toks(100, 20));
  write('live-batch', '10-sim-step.bin', batch(pool.admitPrompt([...toks(100, 8), ...toks(500, 12)]).events));
  write('live-batch', '11-full-state.bin', batch(pool.fullStateEvents()));
}

// cache-identity §4 as vLLM 0.19+ publishes it: LoRA and salt in per-block extra_keys, multimodal
// (identifier, offset) items and embedding bins, a sliding-window group beside group 0, a group-1
// removal and a REMOTE locality; then SGLang's salt in the map and trailing-metadata forms.
const full = { group_idx: 0, kv_cache_spec_kind: 'full_attention', kv_cache_spec_sliding_window: null };
write('live-batch', '12-identity-vllm.bin', batch([
  { ...stored([41, 42], null, toks(1, 8)), lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']], ...full },
  { ...stored([51, 52, 53], null, toks(1, 12)), lora_id: null, lora_name: null, extra_keys: [[['img-1', 0]], [['img-1', -4]], [Uint8Array.of(1, 2, 3)]], ...full },
  { ...stored([41, 42], null, toks(1, 8)), lora_id: null, lora_name: null, group_idx: 1, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 1024 },
  { type: 'BlockRemoved', block_hashes: [42], medium: 'GPU', group_idx: 1 },
  { ...stored([61], null, toks(1, 4)), lora_id: null, lora_name: null, locality: 'REMOTE', ownership: 'shared', session_id: 's-1', ...full },
  ['BlockStored', [71], null, toks(1, 4), 4, null, 'GPU', null, [['tenant-b']], 0, 'full_attention', null, 'LOCAL'],
]));
write('live-batch', '13-identity-sglang.bin', batch([
  ['BlockStored', [81], null, toks(1, 4), 4, null, 'GPU', { cache_salt: 'tenant-c' }],
  { ...stored([82], null, toks(1, 4)), lora_id: null, cache_salt: 'tenant-c' },
  { ...stored([83], 82, toks(5, 4)), lora_id: null, metadata: { cache_salt: 'tenant-c' } },
]));

// ---- snapshot chunks (kv-events §6) ----------------------------------------------------------
const snap = (hash: number, parent: number | null, tokens: number[], media: string[]): WireSnapshotBlock => ({ block_hash: hash, parent_block_hash: parent, token_ids: tokens, media });
write('snapshot-chunk', '01-spec-example.bin', encodeSnapshotChunks(enc, [snap(11, null, toks(1, 4), ['gpu', 'cpu']), snap(12, 11, toks(5, 4), ['cpu'])], 0, 4, 65536, 100)[0]!);
write('snapshot-chunk', '02-empty.bin', encodeSnapshotChunks(enc, [], 0, 4, 65536, 100)[0]!);
write('snapshot-chunk', '03-orphan-lora.bin', encodeSnapshotChunks(enc, [snap(30, 29, toks(1, 4), ['gpu']), { ...snap(31, null, toks(5, 4), ['cpu']), lora_name: 'a', lora_id: 1 }], 0, 4, 65536, 100)[0]!);
{
  const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 8, hostCapacityBlocks: 8 });
  pool.admitPrompt(toks(100, 24));
  pool.admitPrompt([...toks(100, 8), ...toks(900, 16)]);
  write('snapshot-chunk', '04-sim-pool.bin', encodeSnapshotChunks(enc, pool.snapshot(), 0, 4, 65536, 1000)[0]!);
}
// cache-identity §4 per snapshot block: a LoRA + salt root, its LoRA child, a multimodal block.
write('snapshot-chunk', '05-identity.bin', encodeSnapshotChunks(enc, [
  { ...snap(41, null, toks(1, 4), ['gpu']), lora_name: 'sql-lora', lora_id: 1, extra_keys: ['sql-lora', 'tenant-a'] },
  { ...snap(42, 41, toks(5, 4), ['gpu', 'cpu']), lora_name: 'sql-lora', extra_keys: [['sql-lora']] },
  { ...snap(51, null, toks(1, 4), ['cpu']), extra_keys: [['img-1', 0]] },
], 0, 4, 65536, 100)[0]!);

// ---- JSON seeds ------------------------------------------------------------------------------
const json = (v: unknown): string => JSON.stringify(v);
write('heartbeat', '01-full.json', json({ name: '10.0.0.1:8000', incarnation_id: 'inc-1', current_role: 'PREFILL', load_metrics: { waiting_requests_num: 3, gpu_cache_usage_perc: 0.42 }, latency_metrics: { recent_max_ttft: 120.5, recent_max_tbt: 12 } }));
write('heartbeat', '02-liveness.json', json({ name: '10.0.0.2:8000' }));
write('heartbeat', '03-deprecated-cache-event.json', json({ name: '10.0.0.3:8000', cache_event: { stored: [1, 2] }, load_metrics: {} }));

const md = { model_name: 'm', dtype: 'bf16', tp_size: 2, dp_size: 1, pp_size: 1, lora_name: '', extra: 'e', user_data: 'u1' };
write('meta-request', 'registerInstance.json', json({ trace_id: 't1', instance_group: 'test_group', instance_id: 'inst_a', block_size: 16, default_query_type: 'QT_BATCH_GET', location_spec_infos: [{ name: 'tp0', size: 1024 }, { name: 'tp1', size: '2048' }], location_spec_groups: [{ name: 'g0', spec_names: ['tp0'] }], model_deployment: md }));
write('meta-request', 'getInstanceInfo.json', json({ instance_id: 'test_instance' }));
write('meta-request', 'getCacheLocation.json', json({ trace_id: 't2', instance_id: 'test_instance', query_type: 'QT_PREFIX_MATCH', block_keys: ['9223372036854775807', 77, -3], block_mask: { offset: 1 }, sw_size: 0, location_spec_names: ['tp0'] }));
write('meta-request', 'getCacheLocationsByBackend.json', json({ instance_id: 'test_instance', query_type: 'QT_BATCH_GET', block_keys: ['1', 2, -3], block_mask: { bool_masks: { values: [false, true, false] } }, location_spec_names: ['tp0', 'tp0', 'tp0'], backend_selectors: [{ backend_type: 'ST_EVENT_REPORT_L2', strategy: 'LSS_V6D_PREFIX' }, { backend_type: 4, strategy: 'LSS_WEIGHTED_RANDOM' }] }));
write('meta-request', 'getCacheLocationLen.json', json({ instanceId: 'test_instance', queryType: 2, tokenIds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] }));
write('meta-request', 'startWriteCache.json', json({ instance_id: 'test_instance', block_keys: [1, 2, 3], location_spec_group_names: [], write_timeout_seconds: 30, min_replica_count: 1 }));
write('meta-request', 'finishWriteCache.json', json({ instance_id: 'test_instance', write_session_id: 'abc', success_blocks: { bool_masks: { values: [true, false, true] } } }));
write('meta-request', 'removeCache.json', json({ instance_id: 'test_instance', block_keys: ['1', '2'], block_mask: { offset: 0 } }));
write('meta-request', 'trimCache.json', json({ instance_id: 'test_instance', strategy: 'TS_TIMESTAMP', begin_timestamp: 0, end_timestamp: 2147483647 }));
write('meta-request', 'getCacheMetaDetail.json', json({ instance_id: 'test_instance', block_keys: [5], detail_level: 1 }));
write('meta-request', 'reportEvent.json', json({ instance_id: 'test_instance', host_ip_port: '10.0.0.1:8000', storage_type: 'ST_EVENT_REPORT_L2', events: [{ event_type: 'EVENT_NODE_REGISTER', node_register: { mediums: ['gpu'] } }, { event_type: 'EVENT_BLOCK_ADD', block_add: { block_key: '42', medium: 'gpu', specs: [{ name: 'tp0', uri: 'x://h/tp0' }] } }, { event_type: 'EVENT_BLOCK_SNAPSHOT', block_snapshot: { blocks: [{ block_key: '7', medium: 'cpu', specs: [] }] } }] }));
write('meta-request', 'getHostCacheState.json', json({ instance_id: 'test_instance', query_type: 'QT_PREFIX_MATCH', block_cache_keys: ['1', '2'], medium: ['gpu', 'cpu'] }));
write('meta-request', 'getClusterInfo.json', json({}));

const stream = (r: number): unknown => ({ instance_name: `engine-${r}`, dp_rank: r, block_size: 16, endpoint: `tcp://127.0.0.1:${18000 + r}`, replay_endpoint: `tcp://127.0.0.1:${38000 + r}`, topic: 'xllm-kv', hash_seed: 1024 });
write('kv-events-config', '01-empty.json', '{}');
write('kv-events-config', '02-limits.json', json({ max_streams: 16, max_blocks_per_stream: 1000000, max_message_bytes: 65536, max_buffered_bytes: 1048576, replay_timeout_ms: 2000, resync_interval_ms: 5000 }));
write('kv-events-config', '03-streams.json', json({ streams: [stream(0), stream(1)] }));
write('kv-events-config', '04-discovery.json', json({ discovery: { enabled: true, event_port_offset: 10000, replay_port_offset: 30000, block_size: 128, topic: '', refresh_interval_ms: 1000 } }));

write('meta-config', '01-default.json', DEFAULT_META_CONFIG_JSON);

write('router-body', '01-route-ids.json', json({ token_ids: toks(1, 32) }));
write('router-body', '02-route-count.json', json({ prompt_tokens: 812 }));
write('router-body', '03-route-both.json', json({ token_ids: [151643, 0, 65536, 2147483647], prompt_tokens: 5 }));
write('router-body', '04-query-empty.json', json({ token_ids: [] }));

write('flags', '01-directory.json', json(['--http_port=9500', '--grpc_port=9501', '--kv_events_config_file=/tmp/kv.json', '--log_level=info']));
write('flags', '02-router.json', json(['--http_port', '9600', '--load_balance_policy=CAR', '--directory_addr=127.0.0.1:9501,[::1]:9501', '--view_stale_after_ms=2000']));
write('flags', '03-help.json', json(['--help']));
console.log(`corpus written under ${CORPUS_ROOT}`);
