// Simulated engine block pool (kv-events §11.4–§11.8), pure: every emitted event is replayed
// through a strict checker of the publisher obligations and a reference residency model.
import { expect } from 'chai';
import fc from 'fast-check';
import { BlockPool, type BlockPoolOptions } from '../../../tools/engine-sim/block-pool.js';
import { hashToU64 } from '../../../tools/engine-sim/wire-encoding.js';
import { CPU, GPU, ObligationChecker, expectSnapshotMatches, mediaTiers } from './obligation-checker.js';
import { sharedPrefixPrompt, smallPoolCaps } from './pool-arbitraries.js';

function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

function run(opts: BlockPoolOptions, prompts: readonly number[][]): { pool: BlockPool; ref: ObligationChecker } {
  const pool = new BlockPool(opts);
  const ref = new ObligationChecker(opts.blockSize);
  for (const p of prompts) {
    const expected = ref.prefixHits(pool.hashesOf(p));
    const r = pool.admitPrompt(p);
    ref.apply(r.events);
    expect({ device: r.hitBlocks, hostOnly: r.hostHitBlocks }).to.deep.equal(expected);
    expect(pool.deviceBlocks).to.be.at.most(opts.deviceCapacityBlocks);
    expect(pool.hostBlocks).to.be.at.most(opts.hostCapacityBlocks);
  }
  return { pool, ref };
}

describe('engine-sim block pool (kv-events §11)', () => {
  it('§11.4 engine hashes depend on content and prefix, nil-rooted, stable, never 0', () => {
    const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 8, hostCapacityBlocks: 0 });
    const a = pool.hashesOf(range(1, 8));
    expect(a).to.have.length(2);
    expect(pool.hashesOf(range(1, 10))).to.deep.equal(a);
    // Same tokens 5..8 after a different first block: a different hash.
    expect(pool.hashesOf([9, 9, 9, 9, 5, 6, 7, 8])[1]).to.not.equal(a[1]);
    expect(pool.hashesOf(range(1, 8), { loraName: 'x' })[0]).to.not.equal(a[0]);
    expect(a.every((h) => h > 0n && h <= 0xffffffffffffffffn)).to.equal(true);
  });

  it('§11.5 a new prompt is one token-bearing Device store, parent nil, exact tokens', () => {
    const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 8, hostCapacityBlocks: 0 });
    const r = pool.admitPrompt(range(1, 10));
    expect(r).to.include({ hitBlocks: 0, hostHitBlocks: 0, promptBlocks: 2, placedBlocks: 2 });
    expect(r.events).to.deep.equal([
      {
        type: 'BlockStored',
        block_hashes: pool.hashesOf(range(1, 8)),
        parent_block_hash: null,
        token_ids: range(1, 8),
        block_size: 4,
        lora_id: null,
        medium: 'gpu',
        lora_name: null,
        extra_keys: null,
      },
    ]);
  });

  it('prefix reuse: a resident prefix only touches the LRU; the suffix chains on it', () => {
    const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 8, hostCapacityBlocks: 0 });
    pool.admitPrompt(range(1, 8));
    const again = pool.admitPrompt(range(1, 8));
    expect(again.events).to.deep.equal([]);
    expect(again.hitBlocks).to.equal(2);
    const longer = pool.admitPrompt(range(1, 12));
    expect(longer.hitBlocks).to.equal(2);
    const [e] = longer.events as Record<string, unknown>[];
    expect(e.parent_block_hash).to.equal(pool.hashesOf(range(1, 8))[1]);
    expect(e.token_ids).to.deep.equal(range(9, 4));
  });

  it('sync offload: LRU Device eviction copies to Host first (tokenless), then removes from Device', () => {
    const { pool, ref } = run({ blockSize: 4, deviceCapacityBlocks: 2, hostCapacityBlocks: 4 }, [range(1, 8)]);
    const [a0, a1] = pool.hashesOf(range(1, 8));
    const r = pool.admitPrompt(range(101, 8));
    ref.apply(r.events);
    const types = (r.events as Record<string, unknown>[]).map((e) => `${String(e.type)}/${String(e.medium)}`);
    // Child-first eviction keeps the root most recently used: a1 goes first.
    expect(types).to.deep.equal(['BlockStored/cpu', 'BlockRemoved/gpu', 'BlockStored/gpu', 'BlockStored/cpu', 'BlockRemoved/gpu', 'BlockStored/gpu']);
    expect((r.events[0] as Record<string, unknown>).block_hashes).to.deep.equal([a1]);
    expect((r.events[0] as Record<string, unknown>).token_ids).to.deep.equal([]);
    expect((r.events[3] as Record<string, unknown>).block_hashes).to.deep.equal([a0]);
    expect(pool.tiersOf(a0)).to.equal(CPU);
    expect(pool.tiersOf(a1)).to.equal(CPU);
    expectSnapshotMatches(pool.snapshot(), ref);
  });

  it('async offload: Device freed first, Host copy completes later token-bearing (§11.6)', () => {
    const { pool, ref } = run({ blockSize: 4, deviceCapacityBlocks: 2, hostCapacityBlocks: 4, offloadMode: 'async' }, [range(1, 8), range(101, 8)]);
    const [a0, a1] = pool.hashesOf(range(1, 8));
    expect(pool.tiersOf(a0)).to.equal(CPU);
    expect(pool.tiersOf(a1)).to.equal(CPU);
    expectSnapshotMatches(pool.snapshot(), ref);
  });

  it('Host-only prefix hit: counted as host hits and loaded back to Device', () => {
    const { pool, ref } = run({ blockSize: 4, deviceCapacityBlocks: 2, hostCapacityBlocks: 4 }, [range(1, 8), range(101, 8)]);
    const r = pool.admitPrompt(range(1, 8));
    ref.apply(r.events);
    expect(r.hostHitBlocks).to.equal(2);
    expect(r.hitBlocks).to.equal(0);
    const [a0, a1] = pool.hashesOf(range(1, 8));
    expect(pool.tiersOf(a0)).to.equal(GPU | CPU);
    expect(pool.tiersOf(a1)).to.equal(GPU | CPU);
    expectSnapshotMatches(pool.snapshot(), ref);
  });

  it('Host LRU eviction removes per tier; a block gone from both tiers leaves the snapshot', () => {
    const { pool, ref } = run({ blockSize: 4, deviceCapacityBlocks: 2, hostCapacityBlocks: 2 }, [range(1, 8), range(101, 8), range(201, 8)]);
    expect(pool.hostBlocks).to.equal(2);
    for (const h of pool.hashesOf(range(1, 8))) expect(pool.tiersOf(h)).to.equal(0);
    expectSnapshotMatches(pool.snapshot(), ref);
  });

  it('a prompt longer than Device holds is placed up to capacity', () => {
    const { pool } = run({ blockSize: 4, deviceCapacityBlocks: 3, hostCapacityBlocks: 0 }, [range(1, 20)]);
    expect(pool.deviceBlocks).to.equal(3);
  });

  it('§11.7 clear() emits AllBlocksCleared and empties the pool; one tier clears only it', () => {
    const { pool, ref } = run({ blockSize: 4, deviceCapacityBlocks: 2, hostCapacityBlocks: 4 }, [range(1, 8), range(101, 8)]);
    const cpu = pool.clear('cpu');
    ref.apply(cpu);
    expect(cpu).to.deep.equal([{ type: 'AllBlocksCleared', medium: 'cpu' }]);
    expect(pool.hostBlocks).to.equal(0);
    expect(pool.deviceBlocks).to.equal(2);
    expectSnapshotMatches(pool.snapshot(), ref);
    expect(pool.clear()).to.deep.equal([{ type: 'AllBlocksCleared', medium: null }]);
    expect(pool.snapshot()).to.deep.equal([]);
  });

  it('§11.7 LoRA blocks carry lora_name on events and in the snapshot', () => {
    const pool = new BlockPool({ blockSize: 4, deviceCapacityBlocks: 8, hostCapacityBlocks: 0 });
    const r = pool.admitPrompt(range(1, 4), { loraName: 'adapter-a' });
    expect((r.events[0] as Record<string, unknown>).lora_name).to.equal('adapter-a');
    expect(pool.snapshot()[0].lora_name).to.equal('adapter-a');
  });

  it('§7.3 full-state events rebuild the same state from AllBlocksCleared', () => {
    const { pool } = run({ blockSize: 4, deviceCapacityBlocks: 3, hostCapacityBlocks: 3 }, [range(1, 8), range(1, 12), range(101, 8), range(201, 4)]);
    const fresh = new ObligationChecker(4, false);
    fresh.apply(pool.fullStateEvents());
    const snapshot = pool.snapshot();
    // Orphans (parent gone from both tiers) and their descendants cannot be restated (§11.5);
    // everything else is, with the same tiers.
    const listed = new Set<bigint>();
    for (const b of snapshot) {
      if (b.parent_block_hash === null || listed.has(hashToU64(b.parent_block_hash))) listed.add(hashToU64(b.block_hash));
    }
    expect(listed.size).to.be.greaterThan(0);
    expect(fresh.blocks.size).to.equal(listed.size);
    for (const b of snapshot) if (listed.has(hashToU64(b.block_hash))) expect(fresh.tiers(hashToU64(b.block_hash))).to.equal(mediaTiers(b.media));
  });

  it('property: any prompt mix keeps capacities, §11 obligations and snapshot = replayed events', () => {
    fc.assert(
      fc.property(
        smallPoolCaps(),
        fc.array(sharedPrefixPrompt(), { minLength: 1, maxLength: 25 }),
        (caps, prompts) => {
          const { pool, ref } = run({ blockSize: 4, ...caps }, prompts);
          expectSnapshotMatches(pool.snapshot(), ref);
        },
      ),
      { numRuns: 300, seed: 1024 },
    );
  });
});
