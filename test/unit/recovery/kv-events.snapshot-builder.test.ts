// kv-events §6 building through SnapshotBuilder into a real StreamIndex (no sockets).
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { PLAIN_IDENTITY } from '../../../shared/keys/cache-identity.js';
import type { EngineHash, SnapshotBlock } from '../../../directory-svc/decoder/kv-batch.js';
import type { TierBits } from '../../../shared/keys/tier-bits.js';
import type { SnapshotMessage } from '../../../directory-svc/decoder/snapshot-decoder.js';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { SnapshotBuilder } from '../../../directory-svc/recovery/snapshot-builder.js';
import { groupHits } from '../../helpers/index-prefix.js';

function block(hash: number, parent: number | null, tokens: number[], tiers: TierBits): SnapshotBlock {
  return {
    blockHash: BigInt(hash) as EngineHash,
    parentBlockHash: parent === null ? null : (BigInt(parent) as EngineHash),
    tokenIds: Int32Array.from(tokens),
    tiers,
    outOfScope: false,
    multimodal: false,
    identity: PLAIN_IDENTITY,
  };
}

function chunk(watermark: bigint, blocks: SnapshotBlock[]): SnapshotMessage {
  return { kind: 'chunk', watermark, blocks };
}

const TERMINATOR: SnapshotMessage = { kind: 'terminator' };

describe('kv-events §6 snapshot building', () => {
  let hasher: ContentKeyHasher;
  let index: StreamIndex;
  let skipped: SkipCounters;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });
  beforeEach(() => {
    index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 });
    skipped = { outOfScope: 0, descendant: 0, orphan: 0 };
  });

  function classOf(fn: () => unknown): string {
    try {
      fn();
    } catch (e: unknown) {
      if (isStreamError(e)) return e.class;
      throw e;
    }
    return 'none';
  }

  it('§6 example (W = 7) across two chunks: 3 entries, device 4 / host-only 4 for 1..8', () => {
    const b = new SnapshotBuilder(index, skipped);
    expect(b.accept(chunk(7n, [block(11, null, [1, 2, 3, 4], 3)]))).to.equal(null);
    expect(b.accept(chunk(7n, [block(12, 11, [5, 6, 7, 8], 2)]))).to.equal(null);
    expect(b.accept(TERMINATOR)).to.equal(7n);
    expect(index.entryCount).to.equal(3);
    expect(groupHits(index, [1, 2, 3, 4, 5, 6, 7, 8])).to.deep.equal({ deviceBlocks: 1, hostOnlyBlocks: 1 });
  });

  it('R8 an orphan and its descendant are skipped and counted', () => {
    const b = new SnapshotBuilder(index, skipped);
    b.accept(chunk(0n, [block(1, 999, [1, 2, 3, 4], 1), block(2, 1, [5, 6, 7, 8], 1), block(3, null, [9, 9, 9, 9], 1)]));
    expect(b.accept(TERMINATOR)).to.equal(0n);
    expect(skipped).to.deep.equal({ outOfScope: 0, descendant: 1, orphan: 1 });
    expect(index.deviceBlocks).to.equal(1);
  });

  it('R9 mixed watermarks, a duplicate hash, or no chunk before the terminator → protocol', () => {
    const mixed = new SnapshotBuilder(index, skipped);
    mixed.accept(chunk(3n, [block(1, null, [1, 2, 3, 4], 1)]));
    expect(classOf(() => mixed.accept(chunk(4n, [])))).to.equal('protocol');

    const dup = new SnapshotBuilder(new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 }), skipped);
    expect(classOf(() => dup.accept(chunk(0n, [block(1, null, [1, 2, 3, 4], 1), block(1, null, [5, 6, 7, 8], 1)])))).to.equal(
      'protocol',
    );

    const empty = new SnapshotBuilder(new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 }), skipped);
    expect(classOf(() => empty.accept(TERMINATOR))).to.equal('protocol');
  });

  it('the entry budget applies while building → limit', () => {
    const small = new StreamIndex({ blockSize: 4, hasher, maxEntries: 2 });
    const b = new SnapshotBuilder(small, skipped);
    expect(classOf(() => b.accept(chunk(0n, [block(1, null, [1, 2, 3, 4], 3), block(2, 1, [5, 6, 7, 8], 1)])))).to.equal('limit');
  });
});
