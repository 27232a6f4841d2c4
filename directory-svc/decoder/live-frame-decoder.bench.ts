/**
 * Micro-benchmark: live batch decoding (kv-events §2, §3) — decodeLiveMessage (framing checks,
 * field rules, typed arrays) against @msgpack/msgpack `decode` with useBigInt64 on the same
 * payloads (the baseline: generic JS objects, no validation at all).
 *
 * Load: 256 distinct array batches, each one map-form BlockStored of 16 blocks × 128 tokens
 * (2048 token ids 0..151935, 16 uint64 hashes above 2^53, nil parent, "gpu"), as publishers emit
 * them (§11.3). Seed fixed; payloads built before timing; 3 warm-up rounds dropped; then 7 timed
 * rounds, reported as the median. One JSON line on stdout per load.
 *
 * Second load (`live_frame_decoder_identity`, cache-identity §4): the same batches as vLLM 0.19+
 * publishes a LoRA request with a cache salt: `lora_name`, `lora_id`, per-block `extra_keys`
 * (`[lora, salt]` on block 0, `[lora]` after), `group_idx` 0 and `kv_cache_spec_kind`, against the
 * same baseline decoding those payloads.
 *
 * Run: node --import tsx directory-svc/decoder/live-frame-decoder.bench.ts [--quick]
 */
import { decode, encode } from '@msgpack/msgpack';
import { decodeLiveMessage } from './live-frame-decoder.js';
import type { LiveDecoderOptions } from './live-frame-decoder.js';
import { emitResult, isQuickRun, median, runRounds } from '../../bench/lib/bench-kit.js';
import { seededRandom } from '../../bench/lib/seeded-random.js';

const QUICK = isQuickRun();
const BATCHES = 256;
const BLOCKS_PER_BATCH = 16;
const BLOCK_SIZE = 128;
const WARMUP_ROUNDS = 3;
const TIMED_ROUNDS = 7;
const PASSES_PER_ROUND = QUICK ? 4 : 20;

function buildPayloads(identity: boolean): Uint8Array[] {
  const rnd = seededRandom(20261129);
  const out: Uint8Array[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const hashes: bigint[] = [];
    for (let i = 0; i < BLOCKS_PER_BATCH; i++) {
      hashes.push((BigInt(Math.floor(rnd() * 2 ** 32)) << 32n) | BigInt(Math.floor(rnd() * 2 ** 32)) | (1n << 63n));
    }
    const tokens: number[] = [];
    for (let i = 0; i < BLOCKS_PER_BATCH * BLOCK_SIZE; i++) tokens.push(Math.floor(rnd() * 151936));
    const event = {
      type: 'BlockStored',
      block_hashes: hashes,
      parent_block_hash: null,
      token_ids: tokens,
      block_size: BLOCK_SIZE,
      medium: 'gpu',
      lora_id: null as number | null,
      lora_name: null as string | null,
      extra_keys: null as (string[] | null)[] | null,
    };
    if (identity) {
      Object.assign(event, {
        lora_id: 1,
        lora_name: 'sql-lora',
        extra_keys: hashes.map((_, i) => (i === 0 ? ['sql-lora', `tenant-${b % 8}`] : ['sql-lora'])),
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      });
    }
    out.push(encode([1700000000.5 + b, [event], 0], { useBigInt64: true }));
  }
  return out;
}

const topic = new TextEncoder().encode('xllm-kv');
const seqFrame = new Uint8Array(8);
const opts: LiveDecoderOptions = { topic, dpRank: 0, maxMessageBytes: 8 << 20 };

let sink = 0;

function runDecoder(frames: readonly Uint8Array[][]): void {
  for (let i = 0; i < frames.length; i++) {
    const r = decodeLiveMessage(frames[i], opts);
    if (r.kind === 'batch') sink += r.batch.events.length;
  }
}

function runBaseline(payloads: readonly Uint8Array[]): void {
  for (let i = 0; i < payloads.length; i++) {
    const v = decode(payloads[i], { useBigInt64: true }) as unknown[];
    sink += v.length;
  }
}

/** Batches/s of one round of `run`. */
function timeRound(run: () => void): number {
  const t0 = process.hrtime.bigint();
  for (let p = 0; p < PASSES_PER_ROUND; p++) run();
  return (PASSES_PER_ROUND * BATCHES * 1e9) / Number(process.hrtime.bigint() - t0);
}

for (const [name, identity] of [['live_frame_decoder', false], ['live_frame_decoder_identity', true]] as const) {
  const payloads = buildPayloads(identity);
  const frames = payloads.map((p) => [topic, seqFrame, p]);
  // Rounds alternate between the two so load from other processes on the machine hits both alike.
  const rounds = runRounds(WARMUP_ROUNDS, TIMED_ROUNDS, () => {
    const baselineRate = timeRound(() => runBaseline(payloads));
    const decoderRate = timeRound(() => runDecoder(frames));
    return { baselineRate, decoderRate };
  });
  const baseline = median(rounds.map((r) => r.baselineRate));
  const decoder = median(rounds.map((r) => r.decoderRate));

  const payloadBytes = payloads.reduce((s, p) => s + p.length, 0) / payloads.length;
  emitResult({
    name,
    shape: `${BLOCKS_PER_BATCH} blocks x ${BLOCK_SIZE} tokens per batch${identity ? ', LoRA + salt in per-block extra_keys' : ''}`,
    quick: QUICK,
    payload_bytes: Math.round(payloadBytes),
    decoder_batches_per_s: Math.round(decoder),
    decoder_blocks_per_s: Math.round(decoder * BLOCKS_PER_BATCH),
    baseline_batches_per_s: Math.round(baseline),
    baseline_blocks_per_s: Math.round(baseline * BLOCKS_PER_BATCH),
    speedup_vs_baseline: Number((decoder / baseline).toFixed(2)),
    sink: sink > 0,
  });
}
