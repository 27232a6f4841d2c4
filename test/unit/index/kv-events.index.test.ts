// kv-events §5 (index semantics), §6 "Building" (snapshot), §7.5 (comparison) and §8 (prefix match)
// at index level: the §5.3 worked example row by row, I2–I10, the §6 example, R8, R9 (duplicate
// hash), P2, plus churn and residency-observer checks. Events are built as the decoder's objects.
import { expect } from 'chai';
import fc from 'fast-check';
import { ContentKeyHasher, contentKeyHex } from '../../../shared/keys/content-key.js';
import type { StreamErrorClass } from '../../../directory-svc/errors/stream-errors.js';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import type { KvEvent } from '../../../directory-svc/decoder/kv-batch.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import type { StreamIndexOptions } from '../../../directory-svc/index/stream-index.js';
import { walkPrefix, type PrefixHit } from '../../helpers/index-prefix.js';
import { StreamQuery } from '../../../directory-svc/index/stream-query.js';
import type { QueryableStream } from '../../../directory-svc/index/stream-query.js';
import { ReferenceError, ReferenceIndex } from './reference-index.js';
import { BOTH, D, H, K0_HEX, K1_HEX, cleared, hexKey, noSkips, range, removed, snapshotBlock, stored, errorClassOf } from './index-fixtures.js';
import { ResidencyGroups } from '../../../shared/index/residency-groups.js';
import { ServedResidency } from '../../../directory-svc/index/served-residency.js';

let hasher: ContentKeyHasher;

before(async () => {
  hasher = await ContentKeyHasher.forSeed(1024);
});

function newIndex(extra: Partial<StreamIndexOptions> = {}): StreamIndex {
  return new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000, ...extra });
}

function apply(index: StreamIndex, ...events: KvEvent[]): ReturnType<typeof noSkips> {
  const skipped = noSkips();
  index.applyEvents(events, skipped);
  return skipped;
}

/** The typed error thrown by fn; `text` is `<class>: <detail>` as kv-events §10 writes it. */
function errorOf(fn: () => void): { class: StreamErrorClass; text: string } {
  try {
    fn();
  } catch (e) {
    if (isStreamError(e)) return { class: e.class, text: `${e.class}: ${e.detail}` };
    throw e;
  }
  throw new Error('expected a throw');
}

function stream(index: StreamIndex | null, over: Partial<QueryableStream> = {}): QueryableStream {
  return {
    instanceName: 'i-0',
    dpRank: 0,
    blockSize: 4,
    hashSeed: 1024n,
    synchronized: true,
    sequence: 0n,
    error: '',
    index,
    residency: index === null ? null : ServedResidency.of(index),
    ...over,
  };
}

/** [device, host-only, reusable] hit tokens of tokens on one index through StreamQuery. */
function hits(index: StreamIndex, tokens: number[]): [number, number, number] {
  const m = new StreamQuery().query(tokens, [stream(index)]).matches[0];
  return [m.device_hit_tokens, m.host_only_hit_tokens, m.reusable_prefix_tokens];
}

function residency(index: StreamIndex, hex: string): number {
  return index.residencyOf(hexKey(hex), 0);
}

describe('kv-events §5.3 worked example (block_size 4, seed 1024)', () => {
  const q = range(1, 10);

  it('§5.3 seq 0–5 row by row: records, entries, block counts and query 1..10', () => {
    const index = newIndex();
    // seq 0: AllBlocksCleared
    apply(index, cleared(BOTH));
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([0, 0, 0]);
    expect(hits(index, q)).to.deep.equal([0, 0, 0]);
    // seq 1: Stored [11,12] parent nil, tokens 1..8, gpu → 11→K0{D}, 12→K1{D}
    apply(index, stored([11, 12], null, range(1, 8), D));
    expect([residency(index, K0_HEX), residency(index, K1_HEX)]).to.deep.equal([D, D]);
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([2, 2, 0]);
    expect(hits(index, q)).to.deep.equal([8, 0, 8]);
    // seq 2: Stored [11,12] tokenless, cpu → both {D,H}; 4 entries
    apply(index, stored([11, 12], null, [], H, { blockSize: null }));
    expect([residency(index, K0_HEX), residency(index, K1_HEX)]).to.deep.equal([BOTH, BOTH]);
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([4, 2, 2]);
    expect(hits(index, q)).to.deep.equal([8, 0, 8]);
    // seq 3: Removed [12] gpu → 12→K1{H}
    apply(index, removed([12], D));
    expect([residency(index, K0_HEX), residency(index, K1_HEX)]).to.deep.equal([BOTH, H]);
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([3, 1, 2]);
    expect(hits(index, q)).to.deep.equal([4, 4, 8]);
    // seq 4: Removed [11] gpu; Removed [11] cpu → 12→K1{H}; block 0 absent
    apply(index, removed([11], D), removed([11], H));
    expect([residency(index, K0_HEX), residency(index, K1_HEX)]).to.deep.equal([0, H]);
    expect([index.recordCount, index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([1, 1, 0, 1]);
    expect(hits(index, q)).to.deep.equal([0, 0, 0]);
    // seq 5: Stored [13] tokenless, cpu → inconsistent: unknown hash 0x000000000000000d
    const err = errorOf(() => apply(index, stored([13], null, [], H, { blockSize: null })));
    expect(err.class).to.equal('inconsistent');
    expect(err.text).to.equal('inconsistent: unknown hash 0x000000000000000d');
  });
});

describe('kv-events §12 index scenarios I2–I10', () => {
  it('I2 hash 11 (tokens 1..4) then hash 12 (parent 11, tokens 5..8) in two events yield K0, K1; query 1..10 matches 2 blocks', () => {
    const index = newIndex();
    apply(index, stored([11], null, range(1, 4), D), stored([12], 11, range(5, 8), D));
    expect(residency(index, K0_HEX)).to.equal(D);
    expect(residency(index, K1_HEX)).to.equal(D);
    const keys = hasher.chain(range(1, 10), 4);
    expect(contentKeyHex(keys, 0)).to.equal(K0_HEX);
    const out: PrefixHit = { deviceBlocks: -1, hostOnlyBlocks: -1 };
    walkPrefix(index, keys, 2, out);
    expect(out).to.deep.equal({ deviceBlocks: 2, hostOnlyBlocks: 0 });
  });

  it('I3 unknown non-nil parent → inconsistent', () => {
    const index = newIndex();
    const err = errorOf(() => apply(index, stored([12], 99, range(5, 8), D)));
    expect(err.class).to.equal('inconsistent');
    expect(err.text).to.equal('inconsistent: unknown parent 0x0000000000000063');
  });

  it('I3 a known hash re-stored with different tokens → inconsistent; same tokens on another tier is fine', () => {
    const index = newIndex();
    apply(index, stored([11], null, range(1, 4), D));
    apply(index, stored([11], null, range(1, 4), H));
    expect(residency(index, K0_HEX)).to.equal(BOTH);
    expect(errorClassOf(() => apply(index, stored([11], null, [9, 9, 9, 9], D)))).to.equal('inconsistent');
  });

  it('I4 token count ≠ block_size × hashes, or event block_size ≠ stream block_size → protocol', () => {
    expect(errorClassOf(() => apply(newIndex(), stored([11, 12], null, range(1, 7), D)))).to.equal('protocol');
    expect(errorClassOf(() => apply(newIndex(), stored([11], null, range(1, 4), D, { blockSize: 8 })))).to.equal('protocol');
    expect(errorClassOf(() => apply(newIndex(), stored([11], null, range(1, 4), D, { blockSize: null })))).to.equal('protocol');
    expect(errorClassOf(() => apply(newIndex(), stored([], null, range(1, 4), D)))).to.equal('protocol');
    // §5.1 rule 1 applies "unless OUT": an out-of-scope event is not checked.
    const index = newIndex();
    const skipped = apply(index, stored([21], null, range(1, 7), D, { blockSize: 8, outOfScope: true }));
    expect(skipped.outOfScope).to.equal(1);
    expect(index.entryCount).to.equal(1);
  });

  it('I5 tokenless cpu adds Host to known blocks (counts overlap); unknown hash or unknown parent → inconsistent', () => {
    const index = newIndex();
    apply(index, stored([11, 12], null, range(1, 8), D));
    apply(index, stored([11, 12], null, [], H, { blockSize: null }));
    expect([index.deviceBlocks, index.hostBlocks, index.entryCount]).to.deep.equal([2, 2, 4]);
    expect(errorClassOf(() => apply(index, stored([11, 14], null, [], H)))).to.equal('inconsistent');
    expect(errorClassOf(() => apply(newIndex(), stored([], 77, [], H)))).to.equal('inconsistent');
  });

  it('I6 a tokenless event naming a skipped LoRA hash is accepted; a child of a skipped LoRA block is skipped as descendant', () => {
    const index = newIndex();
    let skipped = apply(index, stored([21, 22], null, range(1, 8), D, { outOfScope: true }));
    expect(skipped).to.deep.equal({ outOfScope: 2, descendant: 0, orphan: 0 });
    expect([index.entryCount, index.deviceBlocks]).to.deep.equal([2, 0]);
    skipped = apply(index, stored([21], null, [], H)); // in-scope replica notice on an UNINDEXED hash
    expect(index.entryCount).to.equal(3);
    skipped = apply(index, stored([23, 24], 22, range(9, 16), D)); // in scope, parent UNINDEXED
    expect(skipped).to.deep.equal({ outOfScope: 0, descendant: 2, orphan: 0 });
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([5, 0, 0]);
    expect(hits(index, range(1, 16))).to.deep.equal([0, 0, 0]);
    // An out-of-scope tokenless event on an unknown hash is ignored, and never inconsistent.
    skipped = apply(index, stored([99], 98, [], H, { outOfScope: true }));
    expect(skipped.outOfScope).to.equal(1);
    expect(index.entryCount).to.equal(5);
  });

  it('I6 an UNINDEXED record re-stored in scope takes the key (§5.1 rule 3) and chains on', () => {
    const index = newIndex();
    apply(index, stored([11], null, range(1, 4), H, { outOfScope: true }));
    expect(residency(index, K0_HEX)).to.equal(0);
    apply(index, stored([11, 12], null, range(1, 8), D));
    expect(residency(index, K0_HEX)).to.equal(BOTH);
    expect(residency(index, K1_HEX)).to.equal(D);
    expect(hits(index, range(1, 8))).to.deep.equal([8, 0, 8]);
  });

  it('I6 an indexed record stays indexed when re-stored under an unindexed parent, and its children chain from it', () => {
    const index = newIndex();
    apply(index, stored([11, 12], null, range(1, 8), D));
    apply(index, stored([30], null, [7, 7, 7, 7], D, { outOfScope: true }));
    // 12 is known with K1; k is UNINDEXED (parent 30 is UNINDEXED) → keeps K1, no descendant count.
    const skipped = apply(index, stored([12], 30, range(5, 8), H));
    expect(skipped.descendant).to.equal(0);
    expect(residency(index, K1_HEX)).to.equal(BOTH);
  });

  it('I7 removing Device keeps the Host replica (host-only hit); removing both drops the mapping; unknown hashes are a no-op', () => {
    const index = newIndex();
    apply(index, stored([11], null, range(1, 4), D), stored([11], null, [], H));
    apply(index, removed([11], D));
    expect(hits(index, range(1, 4))).to.deep.equal([0, 4, 4]);
    apply(index, removed([404, 405], D), removed([404], H));
    expect(index.entryCount).to.equal(1);
    apply(index, removed([11], H));
    expect([index.recordCount, index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([0, 0, 0, 0]);
    // The mapping is gone: a tokenless notice on 11 is now an unknown hash.
    expect(errorClassOf(() => apply(index, stored([11], null, [], H)))).to.equal('inconsistent');
  });

  it('I8 AllBlocksCleared with gpu, cpu, nil clears the right tiers', () => {
    const setup = (): StreamIndex => {
      const index = newIndex();
      apply(index, stored([11, 12], null, range(1, 8), D), stored([11], null, [], H), stored([40], null, [4, 4, 4, 4], H));
      return index;
    };
    const gpu = setup();
    apply(gpu, cleared(D));
    expect([gpu.recordCount, gpu.entryCount, gpu.deviceBlocks, gpu.hostBlocks]).to.deep.equal([2, 2, 0, 2]);
    expect(hits(gpu, range(1, 8))).to.deep.equal([0, 4, 4]);
    const cpu = setup();
    apply(cpu, cleared(H));
    expect([cpu.recordCount, cpu.entryCount, cpu.deviceBlocks, cpu.hostBlocks]).to.deep.equal([2, 2, 2, 0]);
    expect(hits(cpu, range(1, 8))).to.deep.equal([8, 0, 8]);
    // nil medium and the positional form both decode to tiers = both.
    const all = setup();
    apply(all, cleared(BOTH));
    expect([all.recordCount, all.entryCount, all.deviceBlocks, all.hostBlocks]).to.deep.equal([0, 0, 0, 0]);
    // The cleared tables still work: re-store and match.
    apply(all, stored([11, 12], null, range(1, 8), D));
    expect(hits(all, range(1, 8))).to.deep.equal([8, 0, 8]);
  });

  it('I9 matching stops at the first absent block although later blocks are resident', () => {
    const index = newIndex();
    apply(index, stored([11, 12, 13], null, range(1, 12), D));
    apply(index, removed([11], D));
    expect([index.deviceBlocks, index.recordCount]).to.deep.equal([2, 2]);
    expect(hits(index, range(1, 12))).to.deep.equal([0, 0, 0]);
  });

  it('I10 replicas and parents count as entries; exceeding max_blocks_per_stream → limit on that stream only', () => {
    const a = newIndex({ maxEntries: 4 });
    const b = newIndex({ maxEntries: 4 });
    apply(a, stored([11, 12], null, range(1, 8), D), stored([11], null, [], H));
    apply(b, stored([11, 12], null, range(1, 8), D), stored([11], null, [], H));
    expect(a.entryCount).to.equal(3);
    apply(a, removed([11], D)); // 11 is now a Host-only parent: still one entry
    expect(a.entryCount).to.equal(2);
    apply(a, stored([13, 14], 12, range(9, 16), D));
    expect(a.entryCount).to.equal(4);
    const err = errorOf(() => apply(a, stored([15], 14, range(17, 20), D)));
    expect(err.class).to.equal('limit');
    expect(err.text).to.equal('limit: max_blocks_per_stream 4 exceeded');
    // A replica is an entry too.
    expect(errorClassOf(() => apply(b, stored([12], null, [], H), stored([12], null, [], D), stored([11], null, [], D)))).to.equal(null);
    expect(b.entryCount).to.equal(4);
    expect(errorClassOf(() => apply(b, stored([13], 12, range(9, 12), H)))).to.equal('limit');
    // The other stream is unaffected by a's limit.
    const c = newIndex({ maxEntries: 4 });
    apply(c, stored([11, 12], null, range(1, 8), D));
    expect(hits(c, range(1, 8))).to.deep.equal([8, 0, 8]);
  });
});

describe('kv-events §6 building from a snapshot', () => {
  it('§6 example: 11→K0{D,H}, 12→K1{H}, 3 entries; query 1..8 → device 4, host-only 4', () => {
    const index = newIndex();
    const skipped = noSkips();
    index.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), BOTH), skipped);
    index.addSnapshotBlock(snapshotBlock(12, 11, range(5, 8), H), skipped);
    expect(residency(index, K0_HEX)).to.equal(BOTH);
    expect(residency(index, K1_HEX)).to.equal(H);
    expect([index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([3, 1, 2]);
    expect(hits(index, range(1, 8))).to.deep.equal([4, 4, 8]);
    expect(skipped).to.deep.equal(noSkips());
  });

  it('R8 orphaned suffix is skipped, independent prefix kept; later events on orphan hashes are consistent', () => {
    const index = newIndex();
    const skipped = noSkips();
    index.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), D), skipped);
    index.addSnapshotBlock(snapshotBlock(12, 11, range(5, 8), D), skipped);
    // 51's parent 50 left both tiers and is not in the reply: orphan; 52 descends from it.
    index.addSnapshotBlock(snapshotBlock(51, 50, range(20, 23), D), skipped);
    index.addSnapshotBlock(snapshotBlock(52, 51, range(24, 27), BOTH), skipped);
    index.addSnapshotBlock(snapshotBlock(60, null, [9, 9, 9, 9], H, true), skipped);
    expect(skipped).to.deep.equal({ outOfScope: 1, descendant: 1, orphan: 1 });
    expect([index.recordCount, index.entryCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([5, 6, 2, 0]);
    expect(hits(index, range(1, 8))).to.deep.equal([8, 0, 8]);
    // Later live events on the orphan hashes: no inconsistency.
    const later = apply(index, stored([51], null, [], H), removed([52], D), stored([53], 52, range(28, 31), D), removed([51], D));
    expect(later.descendant).to.equal(1);
    expect([index.deviceBlocks, index.hostBlocks]).to.deep.equal([2, 0]);
  });

  it('R9 a hash duplicated within the reply → protocol', () => {
    const index = newIndex();
    const skipped = noSkips();
    index.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), D), skipped);
    const err = errorOf(() => index.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), H), skipped));
    expect(err.class).to.equal('protocol');
    expect(err.text).to.equal('protocol: duplicate block_hash 0x000000000000000b in snapshot');
  });

  it('R9 a snapshot block with token_ids ≠ block_size → protocol', () => {
    expect(errorClassOf(() => newIndex().addSnapshotBlock(snapshotBlock(11, null, range(1, 5), D), noSkips()))).to.equal('protocol');
  });

  it('I10 the entry budget applies while building (a both-tier block counts 2)', () => {
    const index = newIndex({ maxEntries: 2 });
    const skipped = noSkips();
    index.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), BOTH), skipped);
    expect(errorClassOf(() => index.addSnapshotBlock(snapshotBlock(12, 11, range(5, 8), H), skipped))).to.equal('limit');
  });
});

describe('kv-events §7.5 comparison (sameStateAs)', () => {
  function live(): StreamIndex {
    const index = newIndex();
    apply(index, stored([11, 12], null, range(1, 8), D), stored([11], null, [], H), stored([21], null, [1, 1, 1, 1], D, { outOfScope: true }));
    return index;
  }

  it('R11 a snapshot of the same state equals the live index', () => {
    const snap = newIndex();
    const skipped = noSkips();
    snap.addSnapshotBlock(snapshotBlock(11, null, range(1, 4), BOTH), skipped);
    snap.addSnapshotBlock(snapshotBlock(12, 11, range(5, 8), D), skipped);
    snap.addSnapshotBlock(snapshotBlock(21, null, [1, 1, 1, 1], D, true), skipped);
    expect(live().sameStateAs(snap)).to.equal(true);
    expect(snap.sameStateAs(live())).to.equal(true);
    expect(newIndex().sameStateAs(newIndex())).to.equal(true);
  });

  it('R11 a different tier set, a missing hash or a different key makes them differ', () => {
    const tier = live();
    apply(tier, stored([12], 11, range(5, 8), H), removed([12], D));
    expect(live().sameStateAs(tier)).to.equal(false);
    const missing = live();
    apply(missing, removed([21], D));
    expect(live().sameStateAs(missing)).to.equal(false);
    expect(missing.sameStateAs(live())).to.equal(false);
    // Same hashes and tiers, but 12 holds other tokens: keys differ.
    const other = newIndex();
    apply(other, stored([11, 12], null, [1, 2, 3, 4, 5, 6, 7, 9], D), stored([11], null, [], H), stored([21], null, [1, 1, 1, 1], D, { outOfScope: true }));
    expect(live().sameStateAs(other)).to.equal(false);
  });

  it('R11 a hash indexed in one and UNINDEXED in the other does not make them differ (only keys indexed in both compare)', () => {
    const a = newIndex();
    apply(a, stored([11], null, range(1, 4), D));
    const b = newIndex();
    apply(b, stored([11], null, range(1, 4), D, { outOfScope: true }));
    expect(a.sameStateAs(b)).to.equal(true);
  });
});

describe('kv-events §8 multi-stream query (StreamQuery)', () => {
  it('P2 rank 0 holding 2 blocks and rank 1 holding 4 blocks of one prompt report 2 and 4 blocks, never combined', () => {
    const r0 = newIndex();
    const r1 = newIndex();
    apply(r0, stored([1, 2], null, range(1, 8), D));
    apply(r1, stored([1, 2, 3, 4], null, range(1, 16), D));
    const res = new StreamQuery().query(range(1, 18), [stream(r1, { dpRank: 1 }), stream(r0, { dpRank: 0 })]);
    expect(res.matches.map((m) => [m.dp_rank, m.device_hit_tokens, m.device_blocks])).to.deep.equal([
      [0, 8, 2],
      [1, 16, 4],
    ]);
    expect(res).to.include({ input_tokens: 18, block_size: 4 });
  });

  it('§8 sorted by instance name then rank; unsynchronized → zero hits and zero block counts with its error', () => {
    const index = newIndex();
    apply(index, stored([1, 2], null, range(1, 8), D));
    const res = new StreamQuery().query(range(1, 8), [
      stream(index, { instanceName: 'b', dpRank: 1 }),
      stream(index, { instanceName: 'b', dpRank: 0, synchronized: false, error: 'gap: expected 3, got 5', sequence: -1n }),
      stream(index, { instanceName: 'a', dpRank: 0, sequence: 41n }),
      stream(null, { instanceName: 'c', synchronized: false, error: 'connecting: tcp://h:1' }),
    ]);
    expect(res.matches).to.deep.equal([
      { instance_name: 'a', dp_rank: 0, synchronized: true, sequence: 41, device_hit_tokens: 8, host_only_hit_tokens: 0, reusable_prefix_tokens: 8, device_blocks: 2, host_blocks: 0, error: '', engine_kind: 'xllm' },
      { instance_name: 'b', dp_rank: 0, synchronized: false, sequence: -1, device_hit_tokens: 0, host_only_hit_tokens: 0, reusable_prefix_tokens: 0, device_blocks: 0, host_blocks: 0, error: 'gap: expected 3, got 5', engine_kind: 'xllm' },
      { instance_name: 'b', dp_rank: 1, synchronized: true, sequence: 0, device_hit_tokens: 8, host_only_hit_tokens: 0, reusable_prefix_tokens: 8, device_blocks: 2, host_blocks: 0, error: '', engine_kind: 'xllm' },
      { instance_name: 'c', dp_rank: 0, synchronized: false, sequence: 0, device_hit_tokens: 0, host_only_hit_tokens: 0, reusable_prefix_tokens: 0, device_blocks: 0, host_blocks: 0, error: 'connecting: tcp://h:1', engine_kind: 'xllm' },
    ]);
  });

  it('§8 empty token list reports state and counts only; a sequence above 2^53 stays exact', () => {
    const index = newIndex();
    apply(index, stored([1, 2], null, range(1, 8), D), stored([1], null, [], H));
    const res = new StreamQuery().query([], [stream(index, { sequence: 2n ** 60n })]);
    expect(res.input_tokens).to.equal(0);
    expect(res.matches[0]).to.include({ device_hit_tokens: 0, host_only_hit_tokens: 0, device_blocks: 2, host_blocks: 1 });
    expect(res.matches[0].sequence).to.equal(2n ** 60n);
  });

  it('§8 top-level block_size is the common block size, 0 when streams differ or there are none', () => {
    const q = new StreamQuery();
    expect(q.query([1], []).block_size).to.equal(0);
    const small = newIndex();
    const big = new StreamIndex({ blockSize: 8, hasher, maxEntries: 100 });
    apply(small, stored([1, 2], null, range(1, 8), D));
    apply(big, stored([1], null, range(1, 8), D, { blockSize: 8 }));
    const res = q.query(range(1, 9), [stream(small), stream(big, { instanceName: 'j', blockSize: 8 })]);
    expect(res.block_size).to.equal(0);
    expect(res.matches.map((m) => m.device_hit_tokens)).to.deep.equal([8, 8]);
  });

  it('§8 each block key is computed once per (block_size, hash_seed) group per query, not per stream, and only while a stream still matches', async () => {
    const seed2048 = await ContentKeyHasher.forSeed(2048);
    const groups = new ResidencyGroups();
    const shared = (index: StreamIndex): ServedResidency => {
      const r = new ServedResidency(groups, index.blockSize, index.hasher);
      r.serve(index);
      return r;
    };
    const streams: QueryableStream[] = [];
    for (let r = 0; r < 4; r++) {
      const index = newIndex();
      apply(index, stored([1, 2], null, range(1, 8), D));
      streams.push(stream(index, { dpRank: r, residency: shared(index) }));
    }
    const other = new StreamIndex({ blockSize: 4, hasher: seed2048, maxEntries: 100 });
    apply(other, stored([1], null, range(1, 4), D));
    streams.push(stream(other, { instanceName: 'z', hashSeed: 2048n, residency: shared(other) }));
    let calls = 0;
    const counted = [hasher, seed2048].map((h) => {
      const original = h.keyInto;
      h.keyInto = function (this: ContentKeyHasher, ...args: Parameters<ContentKeyHasher['keyInto']>) {
        calls++;
        return original.apply(this, args);
      };
      return () => {
        h.keyInto = original;
      };
    });
    try {
      const q = new StreamQuery();
      // 3 blocks: seed 1024 hashes blocks 0–2 once for its 4 streams (all match 2), seed 2048
      // blocks 0–1 (its stream stops after block 0): 5 keys, not 4 × 3 + 3.
      const res = q.query(range(1, 12), streams);
      expect(res.matches.map((m) => m.device_hit_tokens)).to.deep.equal([8, 8, 8, 8, 4]);
      expect(calls).to.equal(5);
      q.query(range(1, 12), streams);
      expect(calls).to.equal(10);
    } finally {
      for (const restore of counted) restore();
    }
  });
});

describe('kv-events §5 residency observer and memory under churn', () => {
  it('§5 the observer hears each content key residency change once, old → new tier bits', () => {
    const seen: string[] = [];
    const index = newIndex({
      onResidencyChange: (words, off, oldTiers, newTiers) => {
        seen.push(`${contentKeyHex(new Uint8Array(words.buffer), off * 4)}:${oldTiers}>${newTiers}`);
      },
    });
    apply(index, stored([11, 12], null, range(1, 8), D));
    apply(index, stored([11], null, [], H));
    apply(index, stored([91], null, range(1, 4), D)); // same content, other hash: residency unchanged
    apply(index, removed([11], D)); // 91 still holds K0 on Device: unchanged
    apply(index, removed([91], D), removed([11], H), removed([12], D));
    expect(seen).to.deep.equal([`${K0_HEX}:0>1`, `${K1_HEX}:0>1`, `${K0_HEX}:1>3`, `${K0_HEX}:3>2`, `${K0_HEX}:2>0`, `${K1_HEX}:1>0`]);
    apply(index, stored([11, 12], null, range(1, 8), H));
    seen.length = 0;
    apply(index, cleared(BOTH));
    expect(seen.sort()).to.deep.equal([`${K0_HEX}:2>0`, `${K1_HEX}:2>0`].sort());
  });

  it('churn: storing and removing many blocks repeatedly returns to 0 entries with bounded table capacity', () => {
    const index = newIndex({ maxEntries: 1 << 20 });
    const blocks = 2000;
    const tokens = new Int32Array(blocks * 4);
    let peak = { records: 0, keys: 0 };
    let bytesAfterFirstRound = 0;
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < tokens.length; i++) tokens[i] = round * 1_000_000 + i;
      const hashes = Array.from({ length: blocks }, (_, i) => BigInt(round * blocks + i + 1));
      const ev = stored(hashes, null, Array.from(tokens), D);
      apply(index, ev, stored(hashes.slice(0, blocks / 2), null, [], H));
      expect(index.entryCount).to.equal(blocks * 1.5);
      const cap = index.tableCapacity;
      if (round === 0) peak = cap;
      expect(cap).to.deep.equal(peak);
      apply(index, removed(hashes, D), removed(hashes, H));
      expect([index.entryCount, index.recordCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([0, 0, 0, 0]);
      expect(index.tableCapacity.records).to.be.at.most(64);
      if (round === 0) bytesAfterFirstRound = index.approxBytes();
      expect(index.approxBytes()).to.equal(bytesAfterFirstRound);
    }
  });
});

describe('kv-events §5 index agrees with a reference model (property)', () => {
  const BS = 2;
  // A small "engine world": fixed prefix paths of engine hashes, each hash with fixed tokens, as a
  // publisher would emit them; equal tokens under equal parents share content keys (residency =
  // union). Hashes include values above 2^32 so both uint32 halves matter.
  const HASH = [0n, 1n, 2n, 0x100000001n, 4n, 0xffffffff00000002n, 6n, 2n ** 64n - 1n, 8n];
  const TOKENS = [[], [1, 2], [2, 1], [1, 1], [2, 2], [1, 2], [2, 1], [1, 1], [1, 2]];
  const PATHS = [[1, 2, 3, 4], [1, 7], [5, 6], [8]];
  const tierArb = fc.constantFrom<1 | 2>(1, 2);
  /** BlockStored along a world path; `faults` adds wrong sizes, tokens, parents and scope. */
  const storedArbWith = (faults: boolean): fc.Arbitrary<KvEvent> =>
    fc
      .record({
        path: fc.nat({ max: PATHS.length - 1 }),
        start: fc.oneof({ arbitrary: fc.constant(0), weight: 5 }, { arbitrary: fc.nat({ max: 3 }), weight: 1 }),
        count: fc.integer({ min: 0, max: 3 }),
        tokenless: fc.integer({ min: 0, max: 5 }).map((x) => x === 0),
        tier: tierArb,
        outOfScope: fc.integer({ min: 0, max: 7 }).map((x) => faults && x === 0),
        badSize: fc.integer({ min: 0, max: 15 }).map((x) => faults && x === 0),
        badTokens: fc.integer({ min: 0, max: 19 }).map((x) => faults && x === 0),
        badParent: fc.oneof({ arbitrary: fc.constant(null), weight: 19 }, { arbitrary: fc.nat({ max: HASH.length - 1 }), weight: faults ? 1 : 0 }),
      })
      .map((r): KvEvent => {
        const path = PATHS[r.path];
        const start = Math.min(r.start, path.length - 1);
        const ids = path.slice(start, start + r.count);
        // Replica notices (tokenless) carry a nil parent, as in §5.3 seq 2.
        let parent: bigint | null = start === 0 || r.tokenless ? null : HASH[path[start - 1]];
        if (r.badParent !== null) parent = r.badParent === 0 ? null : HASH[r.badParent];
        let tokens = ids.flatMap((id) => TOKENS[id]);
        if (r.badTokens) tokens = tokens.map((t) => 3 - t);
        if (r.badSize) tokens = tokens.concat([1]);
        if (r.tokenless) tokens = [];
        return stored(ids.map((id) => HASH[id]), parent, tokens, r.tier, { blockSize: r.tokenless ? null : BS, outOfScope: r.outOfScope });
      });
  const storedArb = storedArbWith(true);
  const removedArb = fc
    .record({ ids: fc.array(fc.integer({ min: 1, max: HASH.length - 1 }), { maxLength: 3 }), tier: tierArb })
    .map((r): KvEvent => removed(r.ids.map((id) => HASH[id]), r.tier));
  const clearedArb = fc.constantFrom<1 | 2 | 3>(1, 2, 3).map((t): KvEvent => cleared(t));
  const eventArb = fc.oneof({ arbitrary: storedArb, weight: 8 }, { arbitrary: removedArb, weight: 3 }, { arbitrary: clearedArb, weight: 1 });
  const publisherEventArb = fc.oneof({ arbitrary: storedArbWith(false), weight: 8 }, { arbitrary: removedArb, weight: 3 }, { arbitrary: clearedArb, weight: 1 });
  /** World parents (kept by hash even after the parent left both tiers, §6) and a parent-first order. */
  const PARENT = new Map<number, number>();
  for (const path of PATHS) for (let i = 1; i < path.length; i++) PARENT.set(path[i], path[i - 1]);
  const depth = (id: number): number => (PARENT.has(id) ? 1 + depth(PARENT.get(id) as number) : 0);
  const PARENT_FIRST = Array.from({ length: HASH.length - 1 }, (_, i) => i + 1).sort((a, b) => depth(a) - depth(b));
  const promptArb = fc.constantFrom(...PATHS).map((path) => path.flatMap((id) => TOKENS[id]));

  it('§5 random event sequences give the same entries, block counts, residency, skips, errors and prefix hits', () => {
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 24 }), fc.array(eventArb, { minLength: 5, maxLength: 40, size: "medium" }), promptArb, (maxEntries, events, prompt) => {
        let index = new StreamIndex({ blockSize: BS, hasher, maxEntries });
        let model = new ReferenceIndex(BS, hasher, maxEntries);
        const promptKeys = hasher.chain(prompt, BS);
        const promptHex = Array.from({ length: promptKeys.length / 16 }, (_, i) => contentKeyHex(promptKeys, i * 16));
        const indexSkips = noSkips();
        const modelSkips = noSkips();
        let applied: KvEvent[] = [];
        for (const e of events) {
          let expected: StreamErrorClass | null = null;
          try {
            model.apply(e, modelSkips);
          } catch (err) {
            if (!(err instanceof ReferenceError)) throw err;
            expected = err.cls;
          }
          expect(errorClassOf(() => index.applyEvents([e], indexSkips))).to.equal(expected);
          if (expected !== null) {
            // The stream discards its index on any error (§5.2): go on from an empty pair.
            index = new StreamIndex({ blockSize: BS, hasher, maxEntries });
            model = new ReferenceIndex(BS, hasher, maxEntries);
            applied = [];
            Object.assign(indexSkips, noSkips());
            Object.assign(modelSkips, noSkips());
            continue;
          }
          applied.push(e);
          const res = model.residency();
          let dev = 0;
          let host = 0;
          for (const t of res.values()) {
            dev += t & 1;
            host += (t >> 1) & 1;
          }
          expect([index.entryCount, index.recordCount, index.deviceBlocks, index.hostBlocks]).to.deep.equal([model.entries(), model.records.size, dev, host]);
          for (const k of model.seenKeys) expect(index.residencyOf(hexKey(k), 0), k).to.equal(res.get(k) ?? 0);
          expect(indexSkips).to.deep.equal(modelSkips);
          const hit: PrefixHit = { deviceBlocks: 0, hostOnlyBlocks: 0 };
          walkPrefix(index, promptKeys, promptHex.length, hit);
          expect([hit.deviceBlocks, hit.hostOnlyBlocks]).to.deep.equal(model.match(promptHex));
        }
        // An index rebuilt from the applied events holds the same state (§7.5).
        const again = new StreamIndex({ blockSize: BS, hasher, maxEntries });
        again.applyEvents(applied, noSkips());
        expect(index.sameStateAs(again)).to.equal(true);
      }),
      { numRuns: 300 },
    );
  });

  it('R11 a snapshot of the live state (parent-first, orphans where a parent left) builds an index equal to it (§6, §7.5)', () => {
    fc.assert(
      fc.property(fc.array(publisherEventArb, { minLength: 5, maxLength: 40, size: 'medium' }), (events) => {
        let live = new StreamIndex({ blockSize: BS, hasher, maxEntries: 1000 });
        let model = new ReferenceIndex(BS, hasher, 1000);
        for (const e of events) {
          try {
            model.apply(e, noSkips());
          } catch (err) {
            if (!(err instanceof ReferenceError)) throw err;
            live = new StreamIndex({ blockSize: BS, hasher, maxEntries: 1000 });
            model = new ReferenceIndex(BS, hasher, 1000);
            continue;
          }
          live.applyEvents([e], noSkips());
        }
        const snap = new StreamIndex({ blockSize: BS, hasher, maxEntries: 1000 });
        const skipped = noSkips();
        for (const id of PARENT_FIRST) {
          const rec = model.records.get(HASH[id]);
          if (!rec) continue;
          const parent = PARENT.get(id);
          snap.addSnapshotBlock(snapshotBlock(HASH[id], parent === undefined ? null : HASH[parent], TOKENS[id], rec.tiers as 1 | 2 | 3), skipped);
        }
        expect(live.sameStateAs(snap)).to.equal(true);
        expect(snap.sameStateAs(live)).to.equal(true);
        expect(snap.entryCount).to.equal(live.entryCount);
        // Orphans only lose content keys, never gain them.
        expect(snap.deviceBlocks).to.be.at.most(live.deviceBlocks);
        expect(snap.hostBlocks).to.be.at.most(live.hostBlocks);
      }),
      { numRuns: 200 },
    );
  });
});
