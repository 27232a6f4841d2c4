// engines.md §2 batch rules, decoder and index level: E9 (a missing dp rank is the stream's for
// vllm/sglang, `protocol` for xllm; SGLang's attn_dp_rank compared like dp_rank) and E13 (a
// STORAGE medium is a tier we do not serve: key derived so children chain, no tier, counted
// skipped{reason=medium}, never an error). Real payloads from the reference msgpack encoder.
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import { decodeBatchPayload } from '../../../directory-svc/decoder/live-frame-decoder.js';
import type { BatchPayloadOptions } from '../../../directory-svc/decoder/live-frame-decoder.js';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';

interface PrefixHit {
  deviceBlocks: number;
  hostOnlyBlocks: number;
}

const enc = (v: unknown): Uint8Array => encode(v, { useBigInt64: true });
const XLLM: BatchPayloadOptions = { dpRank: 1 };
const VLLM: BatchPayloadOptions = { dpRank: 1, historyKindRules: true };
const TS = 1700000000.5;

function classOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (e) {
    if (isStreamError(e)) return e.class;
    throw e;
  }
}

const storedEvent = (hashes: number[], parent: number | null, tokens: number[], medium: string | null): Record<string, unknown> => ({
  type: 'BlockStored',
  block_hashes: hashes,
  parent_block_hash: parent,
  token_ids: tokens,
  block_size: 4,
  lora_id: null,
  medium,
});

describe('engines.md §2 batch rules (decoder)', () => {
  const forms: [string, Uint8Array][] = [
    ['array [ts, events]', enc([TS, []])],
    ['array [ts, events, nil]', enc([TS, [], null])],
    ['map without data_parallel_rank', enc({ ts: TS, events: [] })],
  ];
  for (const [name, payload] of forms) {
    it(`E9 ${name}: the stream's dp_rank for vllm/sglang, protocol for xllm`, () => {
      expect(decodeBatchPayload(payload, 0n, payload.length, VLLM).dpRank).to.equal(1);
      expect(classOf(() => decodeBatchPayload(payload, 0n, payload.length, XLLM))).to.equal('protocol');
    });
  }

  it('E9 a present rank that differs is protocol for every kind; SGLang attn_dp_rank (third element) compared the same way', () => {
    for (const payload of [enc([TS, [], 2]), enc({ ts: TS, events: [], data_parallel_rank: 2 })]) {
      expect(classOf(() => decodeBatchPayload(payload, 0n, payload.length, VLLM))).to.equal('protocol');
      expect(classOf(() => decodeBatchPayload(payload, 0n, payload.length, XLLM))).to.equal('protocol');
    }
    const sglang = enc([TS, [], 1]);
    expect(decodeBatchPayload(sglang, 0n, sglang.length, VLLM).dpRank).to.equal(1);
  });

  it('E13 STORAGE (any case) decodes as an unserved tier for vllm/sglang and stays parse for xllm', () => {
    for (const medium of ['STORAGE', 'storage', 'LocalDisk']) {
      const payload = enc([TS, [storedEvent([11], null, [1, 2, 3, 4], medium), { type: 'BlockRemoved', block_hashes: [11], medium }], 1]);
      const b = decodeBatchPayload(payload, 0n, payload.length, VLLM);
      expect(b.events.map((e) => (e.kind === 'cleared' ? e.tiers : e.tier))).to.deep.equal([0, 0]);
      expect(classOf(() => decodeBatchPayload(payload, 0n, payload.length, XLLM))).to.equal('parse');
    }
  });
});

describe('engines.md §2 STORAGE blocks (index)', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });

  function apply(index: StreamIndex, events: unknown[], skipped: SkipCounters): void {
    const payload = enc([TS, events, 1]);
    index.applyEvents(decodeBatchPayload(payload, 0n, payload.length, VLLM).events, skipped);
  }
  /** §8 walk read from the index's per-key residency: stop at the first key with no tier. */
  const hit = (index: StreamIndex, tokens: number[]): PrefixHit => {
    const keys = hasher.chain(Int32Array.from(tokens), 4);
    const out: PrefixHit = { deviceBlocks: 0, hostOnlyBlocks: 0 };
    for (let b = 0; b < keys.length >>> 4; b++) {
      const t = index.residencyOf(keys, b << 4);
      if (t === 0) break;
      if (t & 1) out.deviceBlocks++;
      else out.hostOnlyBlocks++;
    }
    return out;
  };
  const tokens = [1, 2, 3, 4, 5, 6, 7, 8];

  it('E13 a STORAGE block gets no tier and no credit, is counted skipped{medium}, and its GPU child chains from its key', () => {
    const index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 100 });
    const skipped: SkipCounters = { outOfScope: 0, descendant: 0, orphan: 0 };
    apply(index, [storedEvent([11], null, tokens.slice(0, 4), 'STORAGE')], skipped);
    expect(skipped.medium).to.equal(1);
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([0, 0, 0]);
    expect(hit(index, tokens)).to.deep.equal({ deviceBlocks: 0, hostOnlyBlocks: 0 });
    // A GPU child of the STORAGE-only block: no inconsistent, key chained from the parent's.
    apply(index, [storedEvent([12], 11, tokens.slice(4), 'GPU')], skipped);
    expect(index.deviceBlocks).to.equal(1);
    // The parent loaded back into GPU (tokenless replica notice) takes its derived key: full hit.
    apply(index, [{ type: 'BlockStored', block_hashes: [11], parent_block_hash: null, token_ids: [], block_size: 4, medium: 'GPU' }], skipped);
    expect(hit(index, tokens)).to.deep.equal({ deviceBlocks: 2, hostOnlyBlocks: 0 });
    expect(skipped.descendant).to.equal(0);
  });

  it('E13 STORAGE events never raise: unknown parent, tokenless unknown hash, wrong block size, removal and clear of the medium', () => {
    const index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 100 });
    const skipped: SkipCounters = { outOfScope: 0, descendant: 0, orphan: 0 };
    apply(
      index,
      [
        storedEvent([21], 999, tokens.slice(0, 4), 'STORAGE'),
        { type: 'BlockStored', block_hashes: [22], parent_block_hash: null, token_ids: [], block_size: 4, medium: 'STORAGE' },
        { ...storedEvent([23, 24], null, tokens, 'STORAGE'), block_size: 8 },
        { type: 'BlockRemoved', block_hashes: [21, 77], medium: 'STORAGE' },
        { type: 'AllBlocksCleared', medium: 'STORAGE' },
      ],
      skipped,
    );
    expect(skipped.medium).to.equal(4);
    expect(index.entryCount).to.equal(0);
    // GPU blocks survive a STORAGE clear.
    apply(index, [storedEvent([31], null, tokens.slice(0, 4), 'GPU'), { type: 'AllBlocksCleared', medium: 'STORAGE' }], skipped);
    expect(index.deviceBlocks).to.equal(1);
  });
});
