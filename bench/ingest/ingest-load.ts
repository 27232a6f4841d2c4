/**
 * The ingest benchmark's load (kv-events §3, §11): one pre-encoded cycle of array batches that a
 * publisher can send over and over while the receiving index stays consistent and bounded.
 *
 * Shape: `prompts` prompts of `batchesPerPrompt` batches; each batch stores `blocksPerBatch`
 * chained blocks of `blockSize` token ids (map-form BlockStored, Device, parent = the prompt's
 * previous block, nil for its first). The last batch of a prompt also announces a Host copy
 * (tokenless `cpu` BlockStored, §5.1) of the prompt's first batch; the first batch of prompt j
 * also evicts prompt j − `residentPrompts` from both tiers (BlockRemoved gpu and cpu). So at most
 * `residentPrompts` prompts are resident and the cycle can repeat: prompt j is always evicted
 * before it is stored again, and evicting a prompt that was never stored is a no-op (§5.2).
 *
 * Token ids are uniform in [0, 151643) (a Qwen-sized vocabulary: mostly uint32 on the wire),
 * engine hashes are 64-bit (uint64 on the wire). Fixed seed. Pure: no sockets, no clock.
 */
import { WireEncoder } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { seededRandom } from '../lib/seeded-random.js';

export interface IngestLoadOptions {
  seed: number;
  blockSize: number;
  blocksPerBatch: number;
  batchesPerPrompt: number;
  prompts: number;
  /** Prompts kept resident; < prompts so each is evicted before it comes round again. */
  residentPrompts: number;
  dpRank: number;
}

export interface IngestLoad {
  /** One cycle of batch payloads (frame 2), in send order. */
  readonly payloads: readonly Uint8Array[];
  /** Token-bearing blocks stored by each batch (the benchmark's unit of work). */
  readonly storedBlocksPerBatch: number;
  /** Upper bound of the (engine hash, tier) entries a subscriber holds at any point (§5.2). */
  readonly maxEntries: number;
}

const VOCABULARY = 151_643;

/**
 * The benchmark's shape (publisher and measuring side agree on it): 16 blocks × 128 tokens per
 * batch, 64-block prompts, 128 of 256 prompts resident, so a stream holds ≤ 10,320 entries, far
 * below the §9 default max_blocks_per_stream (262144), and one cycle is 1024 batches (~9 MB).
 */
export const INGEST_LOAD_SHAPE: Omit<IngestLoadOptions, 'seed' | 'dpRank'> = Object.freeze({
  blockSize: 128,
  blocksPerBatch: 16,
  batchesPerPrompt: 4,
  prompts: 256,
  residentPrompts: 128,
});

export function buildIngestLoad(o: IngestLoadOptions): IngestLoad {
  if (o.residentPrompts >= o.prompts) throw new RangeError('residentPrompts must be below prompts');
  const rnd = seededRandom(o.seed);
  const blocksPerPrompt = o.blocksPerBatch * o.batchesPerPrompt;
  // Engine hashes: 64-bit values, distinct with overwhelming probability (§11.4).
  const hashes: bigint[][] = [];
  for (let p = 0; p < o.prompts; p++) {
    const row: bigint[] = [];
    for (let b = 0; b < blocksPerPrompt; b++) {
      row.push((BigInt(Math.floor(rnd() * 0x1_0000_0000)) << 32n) | BigInt(Math.floor(rnd() * 0x1_0000_0000)));
    }
    hashes.push(row);
  }
  const encoder = new WireEncoder();
  const payloads: Uint8Array[] = [];
  let ts = 1_700_000_000.25;
  for (let p = 0; p < o.prompts; p++) {
    const own = hashes[p];
    for (let k = 0; k < o.batchesPerPrompt; k++) {
      const events: WireEvent[] = [];
      if (k === 0) {
        const evicted = hashes[(p - o.residentPrompts + o.prompts) % o.prompts];
        events.push({ type: 'BlockRemoved', block_hashes: evicted, medium: 'gpu' });
        events.push({ type: 'BlockRemoved', block_hashes: evicted.slice(0, o.blocksPerBatch), medium: 'cpu' });
      }
      const from = k * o.blocksPerBatch;
      const tokens: number[] = new Array<number>(o.blocksPerBatch * o.blockSize);
      for (let i = 0; i < tokens.length; i++) tokens[i] = Math.floor(rnd() * VOCABULARY);
      events.push({
        type: 'BlockStored',
        block_hashes: own.slice(from, from + o.blocksPerBatch),
        parent_block_hash: k === 0 ? null : own[from - 1],
        token_ids: tokens,
        block_size: o.blockSize,
        lora_id: null,
        medium: 'gpu',
        lora_name: null,
        extra_keys: null,
      });
      if (k === o.batchesPerPrompt - 1) {
        events.push({ type: 'BlockStored', block_hashes: own.slice(0, o.blocksPerBatch), parent_block_hash: null, token_ids: [], block_size: null, medium: 'cpu' });
      }
      ts += 0.001;
      payloads.push(encoder.encodeBatch(ts, events.map((e) => encoder.encodeEvent(e)), o.dpRank));
    }
  }
  return {
    payloads,
    storedBlocksPerBatch: o.blocksPerBatch,
    // Resident prompts on Device, their first batch also on Host, plus the prompt being stored.
    maxEntries: (o.residentPrompts + 1) * (blocksPerPrompt + o.blocksPerBatch),
  };
}
