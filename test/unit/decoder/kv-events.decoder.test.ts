// kv-events §2, §3, §6 decoder conformance: D1–D9, the §3.3 hash table, the §3.5 byte examples,
// the §6 snapshot example, truncation at every offset, and a seeded mutation fuzz.
// Pure functions only: no sockets here (framing over real ZeroMQ lives in test/protocol/).
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import type { StreamErrorClass } from '../../../directory-svc/errors/stream-errors.js';
import type { KvEvent, LiveBatch, BlockStoredEvent } from '../../../directory-svc/decoder/kv-batch.js';
import { decodeBatchPayload, decodeLiveMessage } from '../../../directory-svc/decoder/live-frame-decoder.js';
import type { LiveDecoderOptions } from '../../../directory-svc/decoder/live-frame-decoder.js';
import {
  SnapshotAssembler,
  decodeSnapshotMessage,
} from '../../../directory-svc/decoder/snapshot-decoder.js';
import type { SnapshotMessage } from '../../../directory-svc/decoder/snapshot-decoder.js';
import { MsgpackReader } from '../../../directory-svc/decoder/msgpack-reader.js';
import { PLAIN_IDENTITY } from '../../../shared/keys/cache-identity.js';
import { seededRandom } from '../../../bench/lib/seeded-random.js';
import { ARRAY_BATCH_WITH_MAP_EVENT, MAP_BATCH, MAP_EVENT, POSITIONAL_BATCH, concatBytes as concat, specBytes } from '../../helpers/spec-bytes.js';

// ---- helpers ---------------------------------------------------------------------------------

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const enc = (v: unknown): Uint8Array => encode(v, { useBigInt64: true });

function u64be(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v, false);
  return b;
}

const TOPIC = utf8('xllm-kv');
const OPTS: LiveDecoderOptions = { topic: TOPIC, dpRank: 0, maxMessageBytes: 65536 };

function liveFrames(payload: Uint8Array, seq = 5n, topic = TOPIC): Uint8Array[] {
  return [topic, u64be(seq), payload];
}

function decodeLive(payload: Uint8Array, opts: LiveDecoderOptions = OPTS): LiveBatch {
  const r = decodeLiveMessage(liveFrames(payload), opts);
  if (r.kind !== 'batch') throw new Error('expected a batch');
  return r.batch;
}

/** Plain comparable form of a batch (typed arrays → arrays). */
function plain(events: readonly KvEvent[]): unknown[] {
  return events.map((e) => {
    if (e.kind === 'cleared') return { ...e };
    if (e.kind === 'removed') return { ...e, blockHashes: [...e.blockHashes] };
    return { ...e, blockHashes: [...e.blockHashes], tokenIds: [...e.tokenIds] };
  });
}

function stored(batch: LiveBatch, i = 0): BlockStoredEvent {
  const e = batch.events[i];
  if (e.kind !== 'stored') throw new Error(`event ${i} is ${e.kind}`);
  return e;
}

/** Runs fn, asserts it throws a StreamError of the given class with message `<class>: ...`. */
function expectStreamError(fn: () => unknown, cls: StreamErrorClass, detail?: RegExp): void {
  let thrown: unknown = undefined;
  try {
    fn();
  } catch (e: unknown) {
    thrown = e;
  }
  expect(thrown, `expected a ${cls} error`).to.not.equal(undefined);
  expect(isStreamError(thrown), `not a StreamError: ${String(thrown)}`).to.equal(true);
  if (!isStreamError(thrown)) return;
  expect(thrown.class, thrown.message).to.equal(cls);
  if (detail) expect(thrown.detail).to.match(detail);
}

/** Array batch `[ts, events, dp_rank]` built with the reference encoder. */
function batch(events: unknown[], dpRank: unknown = 0): Uint8Array {
  return enc([1700000000.5, events, dpRank]);
}

function storedMap(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'BlockStored',
    block_hashes: [11, 12],
    parent_block_hash: null,
    token_ids: [1, 2, 3, 4, 5, 6, 7, 8],
    block_size: 4,
    medium: 'gpu',
    ...fields,
  };
}

// ---- §3.5 fixtures (test/helpers/spec-bytes.ts) ------------------------------------------------

const EXPECTED_EVENT = {
  kind: 'stored',
  blockHashes: [11n, 12n],
  parentBlockHash: null,
  tokenIds: [1, 2, 3, 4, 5, 6, 7, 8],
  blockSize: 4,
  tier: 1,
  outOfScope: false,
  // cache-identity §4: a plain-text block of group 0 (no identity fields on the wire).
  identity: PLAIN_IDENTITY,
  reproducibleBlocks: 2,
  group: 0,
  reusableGroup: true,
};

describe('kv-events §3.5 byte examples', () => {
  it('§3.5 fixtures have the sizes the spec states (44 / 95 / 107 / 136 bytes)', () => {
    expect(POSITIONAL_BATCH.length).to.equal(44);
    expect(MAP_EVENT.length).to.equal(95);
    expect(ARRAY_BATCH_WITH_MAP_EVENT.length).to.equal(107);
    expect(MAP_BATCH.length).to.equal(136);
  });

  it('§3.5 the map event matches the reference encoder byte for byte', () => {
    const ref = enc({
      type: 'BlockStored',
      block_hashes: [11, 12],
      parent_block_hash: null,
      token_ids: [1, 2, 3, 4, 5, 6, 7, 8],
      block_size: 4,
      medium: 'gpu',
    });
    expect(Buffer.from(ref).equals(Buffer.from(MAP_EVENT))).to.equal(true);
  });
});

describe('kv-events §2/§3 live decoder (D1–D9)', () => {
  it('D1 the three §3.5 encodings decode to identical batches', () => {
    const decoded = [POSITIONAL_BATCH, ARRAY_BATCH_WITH_MAP_EVENT, MAP_BATCH].map((p) => decodeLive(p));
    for (const b of decoded) {
      expect(b.seq).to.equal(5n);
      expect(b.ts).to.equal(1700000000.5);
      expect(b.dpRank).to.equal(0);
      expect(plain(b.events)).to.deep.equal([EXPECTED_EVENT]);
    }
  });

  it('D1 a batch mixing map and positional events decodes in order', () => {
    const payload = batch([
      ['AllBlocksCleared'],
      storedMap({ block_hashes: [11], token_ids: [1, 2, 3, 4] }),
      ['BlockStored', [12], 11, [5, 6, 7, 8], 4, null, 'cpu', null, null],
      { type: 'BlockRemoved', block_hashes: [12], medium: 'cpu' },
      ['BlockRemoved', [11]],
      { type: 'AllBlocksCleared', medium: 'gpu' },
    ]);
    const b = decodeLive(payload);
    expect(b.events.map((e) => e.kind)).to.deep.equal(['cleared', 'stored', 'stored', 'removed', 'removed', 'cleared']);
    expect(plain(b.events)).to.deep.equal([
      { kind: 'cleared', tiers: 3 },
      { ...EXPECTED_EVENT, blockHashes: [11n], tokenIds: [1, 2, 3, 4], reproducibleBlocks: 1 },
      { ...EXPECTED_EVENT, blockHashes: [12n], parentBlockHash: 11n, tokenIds: [5, 6, 7, 8], tier: 2, reproducibleBlocks: 1 },
      { kind: 'removed', blockHashes: [12n], tier: 2, group: 0 },
      { kind: 'removed', blockHashes: [11n], tier: 1, group: 0 },
      { kind: 'cleared', tiers: 1 },
    ]);
  });

  it('D1 an empty events array is a valid batch', () => {
    const b = decodeLive(batch([]));
    expect(b.events).to.deep.equal([]);
  });

  it('D2 positional BlockStored with 5 elements gets nil lora fields and Device', () => {
    const b = decodeLive(batch([['BlockStored', [11], null, [1, 2, 3, 4], 4]]));
    expect(plain(b.events)).to.deep.equal([{ ...EXPECTED_EVENT, blockHashes: [11n], tokenIds: [1, 2, 3, 4], reproducibleBlocks: 1 }]);
  });

  it('D2 positional BlockStored with 2 elements: nil parent, no tokens, nil block_size', () => {
    const e = stored(decodeLive(batch([['BlockStored', [11]]])));
    expect(e.parentBlockHash).to.equal(null);
    expect(e.tokenIds.length).to.equal(0);
    expect(e.blockSize).to.equal(null);
    expect(e.tier).to.equal(1);
  });

  it('D2 unknown map keys and extra trailing elements are ignored (cache-identity §4: group and locality fields are read)', () => {
    // cache-identity §4 made group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window and
    // locality known fields (positions 9–12 / 3–4); what follows them, and ownership or
    // session_id keys (rule 5), stays ignored.
    const payload = batch([
      storedMap({ group_idx: 3, kv_cache_spec_kind: 'full_attention', ownership: 'x', session_id: 's', nested: { a: [1, { b: 2 }] } }),
      ['BlockStored', [11, 12], null, [1, 2, 3, 4, 5, 6, 7, 8], 4, null, 'gpu', null, null, null, null, null, null, 'extra', 9],
      ['BlockRemoved', [11, 12], 'gpu', null, null, 'extra', 1.5],
      ['AllBlocksCleared', 'gpu', 'more'],
    ]);
    const b = decodeLive(payload);
    expect(plain(b.events)).to.deep.equal([
      { ...EXPECTED_EVENT, group: 3 },
      EXPECTED_EVENT,
      { kind: 'removed', blockHashes: [11n, 12n], tier: 1, group: 0 },
      { kind: 'cleared', tiers: 3 },
    ]);
  });

  it('D2 extra elements after dp_rank in an array batch are ignored', () => {
    const b = decodeLive(enc([1.5, [], 0, 'extra']));
    expect(b.events.length).to.equal(0);
  });

  describe('D3 block hash forms (§3.3)', () => {
    const rows: Array<[string, string, bigint]> = [
      ['positive fixint', '0b', 0x000000000000000bn],
      ['uint64 11', 'cf 00 00 00 00 00 00 00 0b', 0x000000000000000bn],
      ['uint64 max-1', 'cf ff ff ff ff ff ff ff fe', 0xfffffffffffffffen],
      ['int64 -2', 'd3 ff ff ff ff ff ff ff fe', 0xfffffffffffffffen],
      ['negative fixint -2', 'fe', 0xfffffffffffffffen],
      ['bin(2)', 'c4 02 12 34', 0x0000000000001234n],
      ['bin(16)', 'c4 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f', 0x08090a0b0c0d0e0fn],
      ['bin(0)', 'c4 00', 0x0000000000000000n],
      // Widths the table implies: every int type modulo 2^64, two's complement for negatives.
      ['uint8', 'cc ff', 0xffn],
      ['uint16', 'cd ab cd', 0xabcdn],
      ['uint32', 'ce de ad be ef', 0xdeadbeefn],
      ['int8 -1', 'd0 ff', 0xffffffffffffffffn],
      ['int16 -2', 'd1 ff fe', 0xfffffffffffffffen],
      ['int32 min', 'd2 80 00 00 00', 0xffffffff80000000n],
      ['int64 min', 'd3 80 00 00 00 00 00 00 00', 0x8000000000000000n],
      ['bin(9)', 'c4 09 ff 01 02 03 04 05 06 07 08', 0x0102030405060708n],
    ];
    for (const [name, hex, want] of rows) {
      it(`D3 ${name} (${hex}) decodes to 0x${want.toString(16).padStart(16, '0')}`, () => {
        // As a block hash and as a parent hash: [ts, [["BlockStored", [h], h]], 0]
        const h = specBytes(hex);
        const payload = concat(
          specBytes('93 00 91 93 ab "BlockStored" 91'),
          h,
          h,
          specBytes('00'),
        );
        const e = stored(decodeLive(payload));
        expect(e.blockHashes[0]).to.equal(want);
        expect(e.parentBlockHash).to.equal(want);
      });
    }

    it('D3 a uint64 above 2^53 stays exact', () => {
      const big = 2n ** 53n + 1n;
      const e = stored(decodeLive(batch([storedMap({ block_hashes: [big, 2n ** 64n - 1n], parent_block_hash: big + 2n })])));
      expect([...e.blockHashes]).to.deep.equal([big, 2n ** 64n - 1n]);
      expect(e.parentBlockHash).to.equal(big + 2n);
    });

    it('D3 a hash of another type (str, float, nil inside the list, bool) is parse', () => {
      expectStreamError(() => decodeLive(batch([storedMap({ block_hashes: ['11'] })])), 'parse', /block_hashes/);
      expectStreamError(() => decodeLive(batch([storedMap({ block_hashes: [1.5] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ block_hashes: [null] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ parent_block_hash: true })])), 'parse');
    });
  });

  describe('D4 medium (§3.4)', () => {
    for (const [medium, tier] of [['GPU', 1], ['Gpu', 1], ['gpu', 1], ['cpu', 2], ['CPU', 2], ['cPu', 2]] as const) {
      it(`D4 medium ${JSON.stringify(medium)} normalizes to tier ${tier}`, () => {
        const b = decodeLive(
          batch([
            storedMap({ medium }),
            { type: 'BlockRemoved', block_hashes: [11], medium },
            ['BlockRemoved', [11], medium],
            { type: 'AllBlocksCleared', medium },
          ]),
        );
        expect(plain(b.events).map((e) => (e as { tier?: number; tiers?: number }).tier ?? (e as { tiers: number }).tiers)).to.deep.equal([
          tier,
          tier,
          tier,
          tier,
        ]);
      });
    }

    it('D4 nil medium → Device for Stored/Removed, both tiers for AllBlocksCleared', () => {
      const b = decodeLive(
        batch([
          storedMap({ medium: null }),
          { type: 'BlockStored', block_hashes: [13] },
          { type: 'BlockRemoved', block_hashes: [11], medium: null },
          ['BlockRemoved', [11]],
          { type: 'AllBlocksCleared', medium: null },
          { type: 'AllBlocksCleared' },
        ]),
      );
      expect(plain(b.events).map((e) => (e as { tier?: number; tiers?: number }).tier ?? (e as { tiers: number }).tiers)).to.deep.equal([
        1, 1, 1, 1, 3, 3,
      ]);
    });

    it('D4 positional ["AllBlocksCleared", "gpu"] clears both tiers', () => {
      expect(plain(decodeLive(batch([['AllBlocksCleared', 'gpu']])).events)).to.deep.equal([{ kind: 'cleared', tiers: 3 }]);
    });

    for (const bad of ['disk', '', 7, 'gpux', 'gp', ['gpu'], true]) {
      it(`D4 medium ${JSON.stringify(bad)} → parse (Stored, Removed, AllBlocksCleared)`, () => {
        expectStreamError(() => decodeLive(batch([storedMap({ medium: bad })])), 'parse', /medium/);
        expectStreamError(() => decodeLive(batch([['BlockRemoved', [11], bad]])), 'parse', /medium/);
        expectStreamError(() => decodeLive(batch([{ type: 'AllBlocksCleared', medium: bad }])), 'parse', /medium/);
      });
    }
  });

  describe('D5 malformed payloads and framing', () => {
    it('D5 garbage payloads → parse', () => {
      for (const hex of ['c1', 'ff', '00', 'a3 "abc"', 'c0', 'c3', '91 00', '90', 'cb 00 00 00 00 00 00 00 00', '80']) {
        expectStreamError(() => decodeLive(specBytes(hex)), 'parse');
      }
      expectStreamError(() => decodeLive(new Uint8Array(0)), 'parse', /truncated/);
    });

    it('D5 array batch with fewer than two elements, or map without ts/events → parse', () => {
      expectStreamError(() => decodeLive(enc([1.5])), 'parse', /at least 2/);
      expectStreamError(() => decodeLive(enc([])), 'parse');
      expectStreamError(() => decodeLive(enc({ events: [], data_parallel_rank: 0 })), 'parse', /no ts/);
      expectStreamError(() => decodeLive(enc({ ts: 1, data_parallel_rank: 0 })), 'parse', /no events/);
      expectStreamError(() => decodeLive(enc({ ts: null, events: [], data_parallel_rank: 0 })), 'parse');
      expectStreamError(() => decodeLive(enc([null, [], 0])), 'parse', /ts/);
      expectStreamError(() => decodeLive(enc(['now', [], 0])), 'parse', /ts/);
      expectStreamError(() => decodeLive(enc([1, null, 0])), 'parse', /events/);
      expectStreamError(() => decodeLive(enc([1, { a: 1 }, 0])), 'parse', /events/);
    });

    it('D5 ts accepts any number: float64, float32, ints, negative', () => {
      expect(decodeLive(enc([0, [], 0])).ts).to.equal(0);
      expect(decodeLive(enc([-5, [], 0])).ts).to.equal(-5);
      expect(decodeLive(enc([1700000000, [], 0])).ts).to.equal(1700000000);
      expect(decodeLive(concat(specBytes('93 ca 3f c0 00 00 90 00'))).ts).to.equal(1.5);
    });

    it('D5 trailing bytes after a valid batch → parse', () => {
      expectStreamError(() => decodeLive(concat(POSITIONAL_BATCH, specBytes('00'))), 'parse', /trailing/);
      expectStreamError(() => decodeLive(concat(MAP_BATCH, specBytes('c0'))), 'parse', /trailing/);
    });

    it('D5 truncation at every byte offset of each §3.5 batch → parse, never another exception', () => {
      for (const full of [POSITIONAL_BATCH, ARRAY_BATCH_WITH_MAP_EVENT, MAP_BATCH]) {
        for (let n = 0; n < full.length; n++) {
          expectStreamError(() => decodeLive(full.subarray(0, n)), 'parse');
        }
      }
    });

    it('D5 2- or 4-frame message with the right topic → parse', () => {
      expectStreamError(() => decodeLiveMessage([TOPIC, u64be(1n)], OPTS), 'parse', /2 frames/);
      expectStreamError(() => decodeLiveMessage([TOPIC, u64be(1n), POSITIONAL_BATCH, new Uint8Array(0)], OPTS), 'parse', /4 frames/);
      expectStreamError(() => decodeLiveMessage([TOPIC], OPTS), 'parse');
      expectStreamError(() => decodeLiveMessage([], OPTS), 'parse');
    });

    it('D5 a 7- or 9-byte seq frame → parse', () => {
      expectStreamError(() => decodeLiveMessage([TOPIC, new Uint8Array(7), POSITIONAL_BATCH], OPTS), 'parse', /seq frame/);
      expectStreamError(() => decodeLiveMessage([TOPIC, new Uint8Array(9), POSITIONAL_BATCH], OPTS), 'parse', /seq frame/);
    });

    it('D5 seq is frame 1 read as u64be, exact above 2^53', () => {
      const r = decodeLiveMessage(liveFrames(POSITIONAL_BATCH, 0xfffffffffffffffen), OPTS);
      expect(r.kind === 'batch' && r.batch.seq).to.equal(0xfffffffffffffffen);
      const r5 = decodeLiveMessage([TOPIC, specBytes('00 00 00 00 00 00 00 05'), POSITIONAL_BATCH], OPTS);
      expect(r5.kind === 'batch' && r5.batch.seq).to.equal(5n);
    });

    it('D5 frames that are views into a larger buffer (non-zero byteOffset) decode correctly', () => {
      const big = concat(specBytes('ff ff ff'), TOPIC, u64be(9n), POSITIONAL_BATCH);
      const t = big.subarray(3, 3 + TOPIC.length);
      const s = big.subarray(3 + TOPIC.length, 11 + TOPIC.length);
      const p = big.subarray(11 + TOPIC.length);
      const r = decodeLiveMessage([t, s, p], OPTS);
      expect(r.kind).to.equal('batch');
      if (r.kind === 'batch') {
        expect(r.batch.seq).to.equal(9n);
        expect(plain(r.batch.events)).to.deep.equal([EXPECTED_EVENT]);
      }
    });

    it('D5 hostile container headers are parse errors, not allocations', () => {
      // [ts, events(array32 claiming 2^32-1), 0] in a 20-byte payload
      const huge = specBytes('93 00 dd ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00');
      expect(huge.length).to.equal(20);
      expectStreamError(() => decodeLive(huge), 'parse', /container/);
      // token_ids claiming 2^32-1 ids; block_hashes claiming 65535; map32 claiming 2^32-1 entries
      expectStreamError(() => decodeLive(specBytes('93 00 91 94 ab "BlockStored" 90 c0 dd ff ff ff ff 00')), 'parse');
      expectStreamError(() => decodeLive(specBytes('93 00 91 92 ab "BlockStored" dc ff ff 00')), 'parse');
      expectStreamError(() => decodeLive(specBytes('df ff ff ff ff 00 00')), 'parse');
      // str32 and bin32 lengths beyond the payload
      expectStreamError(() => decodeLive(specBytes('93 00 91 92 db ff ff ff ff 00')), 'parse');
      expectStreamError(() => decodeLive(specBytes('93 00 91 92 ab "BlockStored" 91 c6 ff ff ff ff 00')), 'parse');
    });

    it('D5 deeply nested values in an ignored position are skipped without recursion', () => {
      const depth = 200_000;
      const nested = new Uint8Array(depth + 1).fill(0x91);
      nested[depth] = 0xc0;
      const payload = concat(specBytes('94 00 90 00'), nested);
      const opts = { ...OPTS, maxMessageBytes: payload.length };
      expect(decodeLive(payload, opts).events.length).to.equal(0);
      // The same nesting cut short is a parse error.
      expectStreamError(() => decodeLive(payload.subarray(0, payload.length - 1), opts), 'parse');
    });

    it('D5 ext values (fixext, ext8/16/32) and every scalar type are skippable', () => {
      const extras = specBytes(
        'd4 01 aa d5 01 aa bb d6 01 00 00 00 00 d7 ff 00 00 00 00 00 00 00 00 d8 01' +
          ' 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 c7 02 05 aa bb c8 00 01 05 aa c9 00 00 00 00 05' +
          ' c2 c3 ca 00 00 00 00 cb 00 00 00 00 00 00 00 00 cc 01 cd 00 01 ce 00 00 00 01' +
          ' cf 00 00 00 00 00 00 00 01 d0 ff d1 ff ff d2 ff ff ff ff d3 ff ff ff ff ff ff ff ff' +
          ' d9 01 "a" da 00 01 "b" db 00 00 00 01 "c" c4 01 00 c5 00 01 00 c6 00 00 00 01 00' +
          ' dc 00 01 00 dd 00 00 00 01 00 de 00 01 00 00 df 00 00 00 01 00 00 81 00 00 e0',
      );
      // 3 batch elements + 32 extra values of every other type
      const payload = concat(specBytes('dc 00 23 00 90 00'), extras);
      expect(decodeLive(payload).events.length).to.equal(0);
      expectStreamError(() => decodeLive(concat(specBytes('94 00 90 00 c1'))), 'parse', /0xc1/);
    });
  });

  describe('D6 topic', () => {
    it('D6 topic xllm-kv2 on a stream configured xllm-kv is ignored (no decode, no seq check)', () => {
      const topic2 = utf8('xllm-kv2');
      expect(decodeLiveMessage([topic2, u64be(1n), POSITIONAL_BATCH], OPTS)).to.deep.equal({ kind: 'topic_mismatch' });
      // Checked first: garbage frames behind a foreign topic are never looked at.
      expect(decodeLiveMessage([topic2, new Uint8Array(3)], OPTS).kind).to.equal('topic_mismatch');
      expect(decodeLiveMessage([topic2, u64be(1n), new Uint8Array(OPTS.maxMessageBytes + 1)], OPTS).kind).to.equal(
        'topic_mismatch',
      );
    });

    it('D6 the default empty topic matches only an empty frame 0', () => {
      const opts = { ...OPTS, topic: new Uint8Array(0) };
      expect(decodeLiveMessage([new Uint8Array(0), u64be(0n), POSITIONAL_BATCH], opts).kind).to.equal('batch');
      expect(decodeLiveMessage([TOPIC, u64be(0n), POSITIONAL_BATCH], opts).kind).to.equal('topic_mismatch');
      expect(decodeLiveMessage([utf8('xllm-k'), u64be(0n), POSITIONAL_BATCH], OPTS).kind).to.equal('topic_mismatch');
    });
  });

  describe('D7 event names and forms', () => {
    it('D7 unknown type BlockMoved → parse (map and positional)', () => {
      expectStreamError(() => decodeLive(batch([{ type: 'BlockMoved', block_hashes: [1] }])), 'parse', /BlockMoved/);
      expectStreamError(() => decodeLive(batch([['BlockMoved', [1]]])), 'parse', /BlockMoved/);
      expectStreamError(() => decodeLive(batch([['blockstored', [1]]])), 'parse');
    });

    it('D7 a non-string tag → parse', () => {
      expectStreamError(() => decodeLive(batch([[7, [1]]])), 'parse', /event name/);
      expectStreamError(() => decodeLive(batch([{ type: 7, block_hashes: [1] }])), 'parse', /event name/);
      expectStreamError(() => decodeLive(batch([{ type: null }])), 'parse');
      expectStreamError(() => decodeLive(batch([[null]])), 'parse');
      expectStreamError(() => decodeLive(batch([[]])), 'parse', /empty/);
    });

    it('D7 a map without "type" → parse', () => {
      const { type: _t, ...noType } = storedMap();
      expectStreamError(() => decodeLive(batch([noType])), 'parse', /type/);
      expectStreamError(() => decodeLive(batch([{}])), 'parse', /type/);
    });

    it('D7 "type" need not be the first key', () => {
      const b = decodeLive(batch([{ medium: 'cpu', block_hashes: [11], type: 'BlockRemoved', extra: 1 }]));
      expect(plain(b.events)).to.deep.equal([{ kind: 'removed', blockHashes: [11n], tier: 2, group: 0 }]);
    });

    it('D7 an event that is neither array nor map → parse, naming the event index', () => {
      expectStreamError(() => decodeLive(batch([['AllBlocksCleared'], 'BlockStored'])), 'parse', /^event 1: /);
      expectStreamError(() => decodeLive(batch([5])), 'parse');
    });

    it('D7 present fields of the wrong type → parse', () => {
      const bad: Array<Record<string, unknown>> = [
        { block_hashes: null },
        { block_hashes: 11 },
        { token_ids: 'abc' },
        { token_ids: [1.5] },
        { token_ids: ['1'] },
        { block_size: '4' },
        { block_size: 4.5 },
        { lora_id: 'x' },
        { lora_name: 1 },
        { extra_keys: 'x' },
      ];
      for (const f of bad) expectStreamError(() => decodeLive(batch([storedMap(f)])), 'parse');
      const { block_hashes: _h, ...noHashes } = storedMap();
      expectStreamError(() => decodeLive(batch([noHashes])), 'parse', /block_hashes/);
      expectStreamError(() => decodeLive(batch([{ type: 'BlockRemoved', medium: 'gpu' }])), 'parse', /block_hashes/);
      expectStreamError(() => decodeLive(batch([['BlockRemoved']])), 'parse', /block_hashes/);
    });

    it('D7 nil token_ids ≡ [] and an empty block_hashes list is valid', () => {
      const e = stored(decodeLive(batch([storedMap({ token_ids: null, block_hashes: [] })])));
      expect(e.tokenIds.length).to.equal(0);
      expect(e.blockHashes.length).to.equal(0);
    });
  });

  describe('D8 dp_rank, token range, size limit', () => {
    it('D8 batch dp_rank different, nil or missing → protocol', () => {
      expectStreamError(() => decodeLive(batch([], 1)), 'protocol', /dp_rank 1/);
      expectStreamError(() => decodeLive(batch([], null)), 'protocol', /nil or missing/);
      expectStreamError(() => decodeLive(enc([1.5, []])), 'protocol', /nil or missing/);
      expectStreamError(() => decodeLive(enc({ ts: 1.5, events: [] })), 'protocol', /nil or missing/);
      expectStreamError(() => decodeLive(enc({ ts: 1.5, events: [], data_parallel_rank: 3 })), 'protocol');
      expectStreamError(() => decodeLive(batch([], 2n ** 64n - 1n)), 'protocol');
      expect(decodeLive(batch([], 3), { ...OPTS, dpRank: 3 }).dpRank).to.equal(3);
    });

    it('D8 a dp_rank of the wrong type → parse; parse errors win over a dp_rank mismatch', () => {
      expectStreamError(() => decodeLive(batch([], '0')), 'parse');
      expectStreamError(() => decodeLive(enc({ data_parallel_rank: 1, ts: 1, events: [['BlockMoved']] })), 'parse');
    });

    it('D8 token id 2^31 → parse; int32 bounds are accepted in every width', () => {
      expectStreamError(() => decodeLive(batch([storedMap({ token_ids: [2 ** 31] })])), 'parse', /2147483648/);
      expectStreamError(() => decodeLive(batch([storedMap({ token_ids: [-(2 ** 31) - 1] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ token_ids: [2n ** 63n - 1n] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ token_ids: [2n ** 64n - 1n] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ token_ids: [-(2n ** 40n)] })])), 'parse');
      const ok = [0, 127, -32, 255, -128, 65535, -32768, 2 ** 31 - 1, -(2 ** 31), 151643];
      const e = stored(decodeLive(batch([storedMap({ token_ids: ok })])));
      expect([...e.tokenIds]).to.deep.equal(ok);
      // 64-bit encodings of in-range ids
      const e64 = stored(decodeLive(batch([storedMap({ token_ids: [5n, -5n, 2n ** 31n - 1n, -(2n ** 31n)] })])));
      expect([...e64.tokenIds]).to.deep.equal([5, -5, 2 ** 31 - 1, -(2 ** 31)]);
    });

    it('D8 payload of max_message_bytes + 1 → limit; exactly max_message_bytes is decoded', () => {
      const max = 65536;
      const pad = (n: number): Uint8Array => {
        // [ts, [], 0, bin(k)] padded to exactly n bytes
        const k = n - 4 - 5;
        return concat(specBytes('94 00 90 00 c6'), u32be(k), new Uint8Array(k));
      };
      expect(pad(max).length).to.equal(max);
      expect(decodeLive(pad(max)).events.length).to.equal(0);
      expectStreamError(() => decodeLive(pad(max + 1)), 'limit', /^max_message_bytes 65536 exceeded$/);
      // The limit is checked before decoding: oversize garbage is limit, not parse.
      expectStreamError(() => decodeLive(new Uint8Array(max + 1).fill(0xc1)), 'limit');
    });

    it('D8 the limit error is `limit: max_message_bytes <n> exceeded`', () => {
      try {
        decodeLive(new Uint8Array(70000));
        expect.fail('no error');
      } catch (e: unknown) {
        // §10 form `<class>: <detail>`, composed from the stable fields.
        if (!isStreamError(e)) throw e;
        expect(`${e.class}: ${e.detail}`).to.equal('limit: max_message_bytes 65536 exceeded');
      }
    });
  });

  describe('D9 scope (§3.4, replaced by cache-identity §4)', () => {
    // kv-events D9 as cache-identity §4 changed it: a non-nil lora_name is indexed under its
    // identity, lora_id alone stays out of scope, and extra_keys entries decide per block.
    const scope = (f: Record<string, unknown>): [boolean, number, string | null, string | null] => {
      const e = stored(decodeLive(batch([storedMap(f)])));
      return [e.outOfScope, e.reproducibleBlocks, e.identity.loraName, e.identity.salt];
    };
    const rows: Array<[string, Record<string, unknown>, [boolean, number, string | null, string | null]]> = [
      ['lora_name "adapter" is indexed under LoRA "adapter"', { lora_name: 'adapter' }, [false, 2, 'adapter', null]],
      ['lora_name "" is out of scope (no request names it)', { lora_name: '' }, [true, 0, null, null]],
      ['lora_id 7 without lora_name is out of scope', { lora_id: 7 }, [true, 0, null, null]],
      ['lora_id 0 without lora_name is out of scope', { lora_id: 0 }, [true, 0, null, null]],
      ['lora_id with lora_name is the named LoRA', { lora_id: 3, lora_name: 'a' }, [false, 2, 'a', null]],
      ['extra_keys [[5]]: block 0 unreproducible', { extra_keys: [[5]] }, [false, 0, null, null]],
      ['extra_keys [nil, "mm-hash"]: block 1 entry not a tuple', { extra_keys: [null, 'mm-hash'] }, [false, 1, null, null]],
      ['extra_keys [[], [1]]: block 1 unreproducible', { extra_keys: [[], [1]] }, [false, 1, null, null]],
      ['extra_keys [{}]: block 0 entry not a tuple', { extra_keys: [{}] }, [false, 0, null, null]],
      ['extra_keys [nil]', { extra_keys: [null] }, [false, 2, null, null]],
      ['extra_keys [[]]', { extra_keys: [[]] }, [false, 2, null, null]],
      ['extra_keys []', { extra_keys: [] }, [false, 2, null, null]],
      ['extra_keys nil', { extra_keys: null }, [false, 2, null, null]],
      ['extra_keys [nil, [], nil] (an entry past the last hash is ignored)', { extra_keys: [null, [], null] }, [false, 2, null, null]],
      ['lora_name nil, lora_id nil', { lora_name: null, lora_id: null }, [false, 2, null, null]],
    ];
    for (const [name, f, want] of rows) {
      it(`D9 ${name}`, () => {
        expect(scope(f)).to.deep.equal(want);
      });
    }

    it('D9 positional lora fields and extra_keys', () => {
      const base = ['BlockStored', [11], null, [1, 2, 3, 4], 4];
      const read = (e: unknown[]): [boolean, number, string | null] => {
        const s = stored(decodeLive(batch([e])));
        return [s.outOfScope, s.reproducibleBlocks, s.identity.loraName];
      };
      expect(read([...base, 3])).to.deep.equal([true, 0, null]);
      expect(read([...base, null, 'gpu', 'lora-a'])).to.deep.equal([false, 1, 'lora-a']);
      expect(read([...base, null, 'gpu', null, [[5]]])).to.deep.equal([false, 0, null]);
      expect(read([...base, null, 'gpu', null, [null]])).to.deep.equal([false, 1, null]);
      // array16 encoding of an empty element also counts as empty
      const p = specBytes('93 00 91 99 ab "BlockStored" 91 0b c0 90 04 c0 c0 c0 91 dc 00 00 00');
      expect(stored(decodeLive(p)).reproducibleBlocks).to.equal(1);
    });

    it('D9 out-of-scope events are still fully type-checked (token range, medium)', () => {
      expectStreamError(() => decodeLive(batch([storedMap({ lora_id: 1, token_ids: [2 ** 31] })])), 'parse');
      expectStreamError(() => decodeLive(batch([storedMap({ lora_id: 1, medium: 'disk' })])), 'parse');
    });
  });

  it('§5.1 block_size and token counts are passed through, not checked by the decoder', () => {
    const e = stored(decodeLive(batch([storedMap({ block_size: 16, token_ids: [1, 2, 3] })])));
    expect(e.blockSize).to.equal(16);
    expect([...e.tokenIds]).to.deep.equal([1, 2, 3]);
  });

  it('§7.2 bufferCost = frame bytes + 64/event + 8/block hash + 4/token id', () => {
    const payload = batch([storedMap(), ['BlockRemoved', [11, 12, 13]], ['AllBlocksCleared']]);
    const b = decodeLive(payload);
    const frameBytes = TOPIC.length + 8 + payload.length;
    expect(b.bufferCost).to.equal(frameBytes + 3 * 64 + 8 * (2 + 3) + 4 * 8);
    // decodeBatchPayload takes the frame total from its caller
    expect(decodeBatchPayload(payload, 1n, 1000, { dpRank: 0 }).bufferCost).to.equal(1000 + 3 * 64 + 8 * 5 + 4 * 8);
  });
});

function u32be(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, false);
  return b;
}

// ---- §6 snapshot ------------------------------------------------------------------------------

const SNAP_OPTS = { dpRank: 0, blockSize: 4, maxMessageBytes: 65536 };
const EMPTY = new Uint8Array(0);
const TERMINATOR_FRAMES = [EMPTY, specBytes('ff ff ff ff ff ff ff ff'), EMPTY];

function chunkPayload(overrides: Record<string, unknown> = {}, blocks?: unknown[]): Uint8Array {
  return enc({
    dp_rank: 0,
    block_size: 4,
    blocks: blocks ?? [
      { block_hash: 11, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['gpu', 'cpu'] },
      { block_hash: 12, parent_block_hash: 11, token_ids: [5, 6, 7, 8], media: ['cpu'] },
    ],
    ...overrides,
  });
}

function chunkFrames(payload: Uint8Array, w = 7n): Uint8Array[] {
  return [EMPTY, u64be(w), payload];
}

function blockWith(fields: Record<string, unknown>): Record<string, unknown> {
  return { block_hash: 11, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['gpu'], ...fields };
}

describe('kv-events §6 snapshot decoder', () => {
  it('§6 example: W = 7 chunk (150 bytes) then terminator', () => {
    const payload = chunkPayload();
    expect(payload.length).to.equal(150);
    const msg = decodeSnapshotMessage(chunkFrames(payload), SNAP_OPTS);
    expect(msg.kind).to.equal('chunk');
    if (msg.kind !== 'chunk') return;
    expect(msg.watermark).to.equal(7n);
    expect(
      msg.blocks.map((b) => ({ ...b, tokenIds: [...b.tokenIds] })),
    ).to.deep.equal([
      { blockHash: 11n, parentBlockHash: null, tokenIds: [1, 2, 3, 4], tiers: 3, outOfScope: false, multimodal: false, identity: PLAIN_IDENTITY },
      { blockHash: 12n, parentBlockHash: 11n, tokenIds: [5, 6, 7, 8], tiers: 2, outOfScope: false, multimodal: false, identity: PLAIN_IDENTITY },
    ]);
    expect(decodeSnapshotMessage(TERMINATOR_FRAMES, SNAP_OPTS)).to.deep.equal({ kind: 'terminator' });
    const asm = new SnapshotAssembler();
    asm.accept(msg);
    expect(asm.complete).to.equal(false);
    asm.accept(decodeSnapshotMessage(TERMINATOR_FRAMES, SNAP_OPTS));
    expect(asm.complete).to.equal(true);
    expect(asm.watermark).to.equal(7n);
    expect(asm.chunkCount).to.equal(1);
  });

  it('§6 W = 0 and W = 2^64-2 are watermarks; media case-insensitive; hash forms as §3.3', () => {
    const p = chunkPayload({}, [blockWith({ block_hash: 2n ** 64n - 1n, parent_block_hash: -2, media: ['CPU', 'Gpu'] })]);
    const m0 = decodeSnapshotMessage(chunkFrames(p, 0n), SNAP_OPTS);
    expect(m0.kind === 'chunk' && m0.watermark).to.equal(0n);
    const m = decodeSnapshotMessage(chunkFrames(p, 2n ** 64n - 2n), SNAP_OPTS);
    if (m.kind !== 'chunk') throw new Error('chunk expected');
    expect(m.watermark).to.equal(2n ** 64n - 2n);
    expect(m.blocks[0].blockHash).to.equal(2n ** 64n - 1n);
    expect(m.blocks[0].parentBlockHash).to.equal(2n ** 64n - 2n);
    expect(m.blocks[0].tiers).to.equal(3);
  });

  it('R9 framing: wrong frame count, non-empty frame 0, frame 1 not 8 bytes → parse', () => {
    const p = chunkPayload();
    expectStreamError(() => decodeSnapshotMessage([u64be(7n), p], SNAP_OPTS), 'parse', /2 frames/);
    expectStreamError(() => decodeSnapshotMessage([EMPTY, u64be(7n), p, EMPTY], SNAP_OPTS), 'parse', /4 frames/);
    expectStreamError(() => decodeSnapshotMessage([specBytes('00'), u64be(7n), p], SNAP_OPTS), 'parse', /frame 0/);
    expectStreamError(() => decodeSnapshotMessage([EMPTY, new Uint8Array(7), p], SNAP_OPTS), 'parse', /watermark frame/);
    expectStreamError(() => decodeSnapshotMessage([EMPTY, new Uint8Array(9), p], SNAP_OPTS), 'parse', /watermark frame/);
  });

  it('R9 empty chunk or non-empty terminator payload → parse; oversized chunk → limit', () => {
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(EMPTY), SNAP_OPTS), 'parse', /empty/);
    expectStreamError(
      () => decodeSnapshotMessage([EMPTY, specBytes('ff ff ff ff ff ff ff ff'), chunkPayload()], SNAP_OPTS),
      'parse',
      /terminator/,
    );
    const p = chunkPayload();
    expectStreamError(
      () => decodeSnapshotMessage(chunkFrames(p), { ...SNAP_OPTS, maxMessageBytes: p.length - 1 }),
      'limit',
      /^max_message_bytes 149 exceeded$/,
    );
    expect(decodeSnapshotMessage(chunkFrames(p), { ...SNAP_OPTS, maxMessageBytes: p.length }).kind).to.equal('chunk');
  });

  it('R9 chunk with wrong dp_rank or block_size (different, nil, missing) → protocol', () => {
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(chunkPayload({ dp_rank: 1 })), SNAP_OPTS), 'protocol', /dp_rank/);
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(chunkPayload({ dp_rank: null })), SNAP_OPTS), 'protocol', /dp_rank/);
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(enc({ block_size: 4, blocks: [] })), SNAP_OPTS), 'protocol', /dp_rank/);
    expectStreamError(
      () => decodeSnapshotMessage(chunkFrames(chunkPayload({ block_size: 16 })), SNAP_OPTS),
      'protocol',
      /block_size/,
    );
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(enc({ dp_rank: 0, blocks: [] })), SNAP_OPTS), 'protocol', /block_size/);
  });

  it('R9 mixed watermarks across chunks, or no chunk before the terminator → protocol', () => {
    const asm = new SnapshotAssembler();
    asm.accept(decodeSnapshotMessage(chunkFrames(chunkPayload(), 7n), SNAP_OPTS));
    asm.accept(decodeSnapshotMessage(chunkFrames(chunkPayload({}, []), 7n), SNAP_OPTS));
    expectStreamError(() => asm.accept(decodeSnapshotMessage(chunkFrames(chunkPayload(), 8n), SNAP_OPTS)), 'protocol', /watermark/);
    const empty = new SnapshotAssembler();
    expectStreamError(() => empty.accept({ kind: 'terminator' }), 'protocol', /no chunk/);
    const done = new SnapshotAssembler();
    const chunk: SnapshotMessage = decodeSnapshotMessage(chunkFrames(chunkPayload()), SNAP_OPTS);
    done.accept(chunk);
    done.accept({ kind: 'terminator' });
    expectStreamError(() => done.accept(chunk), 'protocol', /after the terminator/);
  });

  it('§6 token_ids must hold exactly block_size ids → protocol; ids outside int32 → parse', () => {
    const dec = (b: Record<string, unknown>): unknown => decodeSnapshotMessage(chunkFrames(chunkPayload({}, [b])), SNAP_OPTS);
    expectStreamError(() => dec(blockWith({ token_ids: [1, 2, 3] })), 'protocol', /3 token ids/);
    expectStreamError(() => dec(blockWith({ token_ids: [1, 2, 3, 4, 5] })), 'protocol');
    expectStreamError(() => dec(blockWith({ token_ids: null })), 'protocol');
    expectStreamError(() => dec(blockWith({ token_ids: [1, 2, 3, 2 ** 31] })), 'parse', /int32/);
    expectStreamError(() => dec(blockWith({ token_ids: 'x' })), 'parse');
  });

  it('§6 media: empty or repeated → protocol; nil, missing, non-array or a non-§3.4 value → parse', () => {
    const dec = (b: Record<string, unknown>): unknown => decodeSnapshotMessage(chunkFrames(chunkPayload({}, [b])), SNAP_OPTS);
    expectStreamError(() => dec(blockWith({ media: [] })), 'protocol', /empty/);
    expectStreamError(() => dec(blockWith({ media: ['gpu', 'GPU'] })), 'protocol', /twice/);
    expectStreamError(() => dec(blockWith({ media: null })), 'parse', /media/);
    const { media: _m, ...noMedia } = blockWith({});
    expectStreamError(() => dec(noMedia), 'parse', /media/);
    expectStreamError(() => dec(blockWith({ media: 'gpu' })), 'parse');
    expectStreamError(() => dec(blockWith({ media: ['disk'] })), 'parse');
    expectStreamError(() => dec(blockWith({ media: [''] })), 'parse');
    expectStreamError(() => dec(blockWith({ media: [null] })), 'parse');
    expectStreamError(() => dec(blockWith({ media: [1] })), 'parse');
  });

  it('§6 block shape: block_hash required and a hash; blocks not maps; envelope not a map → parse', () => {
    const dec = (p: Uint8Array): unknown => decodeSnapshotMessage(chunkFrames(p), SNAP_OPTS);
    const { block_hash: _h, ...noHash } = blockWith({});
    expectStreamError(() => dec(chunkPayload({}, [noHash])), 'parse', /block_hash/);
    expectStreamError(() => dec(chunkPayload({}, [blockWith({ block_hash: null })])), 'parse', /block_hash/);
    expectStreamError(() => dec(chunkPayload({}, [blockWith({ block_hash: 'x' })])), 'parse');
    expectStreamError(() => dec(chunkPayload({}, [blockWith({ parent_block_hash: 1.5 })])), 'parse');
    expectStreamError(() => dec(chunkPayload({}, [[11, null, [1, 2, 3, 4], ['gpu']]])), 'parse', /^block 0: /);
    expectStreamError(() => dec(chunkPayload({ blocks: null })), 'parse', /blocks/);
    expectStreamError(() => dec(chunkPayload({ blocks: {} })), 'parse');
    expectStreamError(() => dec(chunkPayload({ dp_rank: '0' })), 'parse');
    expectStreamError(() => dec(enc([0, 4, []])), 'parse');
    expectStreamError(() => dec(concat(chunkPayload(), specBytes('00'))), 'parse', /trailing/);
  });

  it('§6 parse errors win over protocol violations whatever the key order', () => {
    const p = enc({ dp_rank: 1, blocks: [blockWith({ media: ['disk'] })], block_size: 4 });
    expectStreamError(() => decodeSnapshotMessage(chunkFrames(p), SNAP_OPTS), 'parse');
  });

  it('§6 scope fields (optional) per cache-identity §4: LoRA indexed, lora_id alone out of scope, multimodal entries skipped; unknown keys ignored', () => {
    const p = chunkPayload({ extra: { x: 1 } }, [
      blockWith({ lora_name: 'a' }),
      blockWith({ lora_id: 3 }),
      blockWith({ extra_keys: [[5]] }),
      blockWith({ extra_keys: [null] }),
      blockWith({ extra_keys: [[]], lora_name: null, lora_id: null, group_idx: 1 }),
    ]);
    const m = decodeSnapshotMessage(chunkFrames(p), SNAP_OPTS);
    if (m.kind !== 'chunk') throw new Error('chunk expected');
    expect(m.blocks.map((b) => [b.outOfScope, b.multimodal, b.identity.loraName])).to.deep.equal([
      [false, false, 'a'],
      [true, false, null],
      [false, true, null],
      [false, false, null],
      [false, false, null],
    ]);
  });

  it('§6 truncation at every byte offset of the example chunk → parse', () => {
    const p = chunkPayload();
    for (let n = 1; n < p.length; n++) {
      expectStreamError(() => decodeSnapshotMessage(chunkFrames(p.subarray(0, n)), SNAP_OPTS), 'parse');
    }
  });
});

// ---- MessagePack reader details -----------------------------------------------------------------

describe('kv-events §3 MessagePack reader', () => {
  it('§3.3 readHash leaves the halves of the bit pattern; readInt32 rejects non-ints', () => {
    const r = new MsgpackReader(specBytes('d3 80 00 00 00 00 00 00 01 ca 00 00 00 00'));
    r.readHash('h');
    expect([r.hashHi, r.hashLo]).to.deep.equal([0x80000000, 1]);
    expectStreamError(() => r.readInt32('t'), 'parse', /expected int, got float/);
  });
});

// ---- round-trip properties against the reference encoder -------------------------------------------

describe('kv-events §3.1/§3.3 round trip (fast-check, fixed seed)', () => {
  it('D3 any int32 token ids and any 64-bit hashes (uint or int encodings) decode exactly', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 300 }),
        fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }), { maxLength: 20 }),
        fc.boolean(),
        (tokens, hashes, positional) => {
          // Small values as numbers (fixint/uint8..32 encodings), the rest as bigint (uint64/int64).
          const wireHashes = hashes.map((h) => (h >= -(2n ** 31n) && h < 2n ** 32n ? Number(h) : h));
          const event = positional
            ? ['BlockStored', wireHashes, null, tokens]
            : { type: 'BlockStored', block_hashes: wireHashes, token_ids: tokens };
          const e = stored(decodeLive(batch([event])));
          expect([...e.tokenIds]).to.deep.equal(tokens);
          expect([...e.blockHashes]).to.deep.equal(hashes.map((h) => BigInt.asUintN(64, h)));
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });

  it('D8 a token id outside int32 anywhere in the list is parse, wherever it sits', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { maxLength: 50 }),
        fc.oneof(
          fc.integer({ min: 2 ** 31, max: 2 ** 32 - 1 }),
          fc.bigInt({ min: 2n ** 32n, max: 2n ** 64n - 1n }),
          fc.bigInt({ min: -(2n ** 63n), max: -(2n ** 31n) - 1n }),
        ),
        fc.nat(),
        (tokens, bad, at) => {
          const list: Array<number | bigint> = [...tokens];
          list.splice(at % (list.length + 1), 0, bad);
          // Positional with token_ids last, so the bad id may sit in the last bytes of the payload.
          expectStreamError(() => decodeLive(batch([['BlockStored', [1], null, list]])), 'parse', /int32/);
        },
      ),
      { seed: 7, numRuns: 200 },
    );
  });
});

// ---- mutation fuzz --------------------------------------------------------------------------------

function mutate(src: Uint8Array, rnd: () => number): Uint8Array {
  const b = Uint8Array.from(src);
  const op = Math.floor(rnd() * 4);
  const at = Math.floor(rnd() * b.length);
  if (op === 0) {
    const flips = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < flips; i++) b[Math.floor(rnd() * b.length)] ^= 1 << Math.floor(rnd() * 8);
    return b;
  }
  if (op === 1) {
    b[at] = Math.floor(rnd() * 256);
    return b;
  }
  if (op === 2) return b.subarray(0, at);
  // Interesting bytes: container/str headers with large counts, never-used byte, nil.
  const specials = [0xdd, 0xdf, 0xdb, 0xc6, 0xc9, 0xc1, 0xc0, 0xff, 0x9f, 0x8f, 0xcf, 0xd3];
  b[at] = specials[Math.floor(rnd() * specials.length)];
  return b;
}

describe('kv-events §3/§6 decoder mutation fuzz', () => {
  it('§3 seeded mutations of valid live payloads only ever throw StreamError subclasses', () => {
    const seeds = [
      POSITIONAL_BATCH,
      ARRAY_BATCH_WITH_MAP_EVENT,
      MAP_BATCH,
      batch([
        ['AllBlocksCleared'],
        storedMap({ lora_name: 'x', extra_keys: [[1, 2], null], block_hashes: [2n ** 64n - 1n, -5] }),
        ['BlockRemoved', [11], 'cpu', 'extra'],
        { type: 'AllBlocksCleared', medium: 'CPU' },
      ]),
    ];
    const rnd = seededRandom(0x5eed);
    let ok = 0;
    let failed = 0;
    for (let i = 0; i < 3000; i++) {
      const p = mutate(seeds[i % seeds.length], rnd);
      try {
        decodeLiveMessage(liveFrames(p), OPTS);
        ok++;
      } catch (e: unknown) {
        if (!isStreamError(e)) throw new Error(`mutation ${i} threw a non-StreamError: ${String(e)}`);
        expect(['parse', 'protocol', 'limit']).to.include(e.class);
        failed++;
      }
    }
    expect(ok + failed).to.equal(3000);
    expect(failed).to.be.greaterThan(0);
  });

  it('§6 seeded mutations of a valid snapshot chunk only ever throw StreamError subclasses', () => {
    const src = chunkPayload({}, [
      blockWith({}),
      blockWith({ block_hash: 12, parent_block_hash: 11, media: ['cpu', 'gpu'], extra_keys: [[7]] }),
    ]);
    const rnd = seededRandom(0xc0ffee);
    for (let i = 0; i < 1500; i++) {
      const p = mutate(src, rnd);
      try {
        decodeSnapshotMessage(chunkFrames(p), SNAP_OPTS);
      } catch (e: unknown) {
        if (!isStreamError(e)) throw new Error(`mutation ${i} threw a non-StreamError: ${String(e)}`);
        expect(['parse', 'protocol', 'limit']).to.include(e.class);
      }
    }
  });
});
