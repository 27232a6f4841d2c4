// The simulated engine's pool keyed by cache identity (cache-identity §6), pure: LoRA name on every
// block and cache_salt on block 0, as vLLM's generate_block_hash_extra_keys builds extra keys; and
// a hybrid model's sliding-window group (vLLM group_idx 1) beside a full-attention group 0 whose
// residency is exactly a plain pool's.
import { expect } from 'chai';
import fc from 'fast-check';
import { BlockPool, type AdmitOptions, type BlockPoolOptions } from '../../../tools/engine-sim/block-pool.js';
import { ResidencyModel } from '../../../tools/engine-sim/residency-model.js';
import type { WireEvent } from '../../../tools/engine-sim/wire-types.js';
import { ObligationChecker, expectSnapshotMatches } from './obligation-checker.js';
import { sharedPrefixPrompt, smallPoolCaps } from './pool-arbitraries.js';

type Ev = Record<string, unknown>;

function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

const PLAIN = {};
const LORA: AdmitOptions = { loraName: 'sql-lora', loraId: 1 };
const SALT: AdmitOptions = { cacheSalt: 'tenant-a' };
const BOTH: AdmitOptions = { loraName: 'sql-lora', loraId: 1, cacheSalt: 'tenant-a' };

function pool(opts: Partial<BlockPoolOptions> = {}): BlockPool {
  return new BlockPool({ blockSize: 4, deviceCapacityBlocks: 64, hostCapacityBlocks: 0, ...opts });
}

/** The events of one group: group_idx absent or equal. */
function ofGroup(events: readonly (WireEvent | Ev)[], group: number): Ev[] {
  return (events as readonly Ev[]).filter((e) => (e.group_idx ?? 0) === group);
}

describe('engine-sim pool keyed by cache identity (cache-identity §6)', () => {
  it('CI1/CI2 same tokens under plain, LoRA, salt and both: four distinct chains; every later block differs too', () => {
    const p = pool();
    const chains = [PLAIN, LORA, SALT, BOTH, { loraName: 'other-lora' }, { cacheSalt: 'tenant-b' }].map((id) => p.hashesOf(range(1, 12), id));
    for (let i = 0; i < chains.length; i++) {
      for (let j = i + 1; j < chains.length; j++) {
        for (let b = 0; b < 3; b++) expect(chains[i]![b], `identity ${i} vs ${j}, block ${b}`).to.not.equal(chains[j]![b]);
      }
    }
    // A LoRA named like a salt is another identity (the simulator tags its terms).
    expect(p.hashesOf(range(1, 4), { loraName: 'x' })[0]).to.not.equal(p.hashesOf(range(1, 4), { cacheSalt: 'x' })[0]);
    // The adapter's id is published, never hashed: a reloaded adapter keeps its cache.
    expect(p.hashesOf(range(1, 12), { loraName: 'sql-lora', loraId: 7 })).to.deep.equal(chains[1]);
    // An empty salt is no salt (vLLM: `if request.cache_salt`).
    expect(p.hashesOf(range(1, 8), { cacheSalt: '' })).to.deep.equal(p.hashesOf(range(1, 8)));
    // A plain chain hashes exactly as before identities existed.
    expect(p.hashesOf(range(1, 8), { loraName: null, cacheSalt: null, loraId: null })).to.deep.equal(p.hashesOf(range(1, 8)));
  });

  it('CI1 the same identity and tokens share blocks; another identity never does', () => {
    const p = pool();
    p.admitPrompt(range(1, 8), LORA);
    expect(p.admitPrompt(range(1, 8), LORA)).to.include({ hitBlocks: 2 });
    const r = p.admitPrompt(range(1, 8), PLAIN);
    expect(r.hitBlocks).to.equal(0);
    expect(r.events).to.have.length(1);
    expect(p.admitPrompt(range(1, 8), { loraName: 'sql-lora' }).hitBlocks, 'same name, no id: same blocks').to.equal(2);
    expect(p.admitPrompt(range(1, 8), BOTH).hitBlocks).to.equal(0);
    expect(p.admitPrompt(range(1, 12), BOTH).hitBlocks).to.equal(2);
    expect(p.deviceBlocks).to.equal(2 + 2 + 3);
  });

  it('CI2 a salted chain is reused only with the same salt: another salt and no salt miss from block 0', () => {
    const p = pool();
    p.admitPrompt(range(1, 12), SALT);
    expect(p.admitPrompt(range(1, 12), SALT).hitBlocks).to.equal(3);
    expect(p.admitPrompt(range(1, 12), { cacheSalt: 'tenant-b' }).hitBlocks).to.equal(0);
    expect(p.admitPrompt(range(1, 12)).hitBlocks).to.equal(0);
  });

  it('§6 BlockStored: lora_name and lora_id on LoRA events; extra_keys [lora] per block, [lora, salt] / [salt] on block 0, nil for plain', () => {
    const p = pool();
    const stored = (tokens: number[], id: AdmitOptions): Ev => {
      const events = p.admitPrompt(tokens, id).events as Ev[];
      expect(events).to.have.length(1);
      return events[0]!;
    };
    expect(stored(range(1, 8), PLAIN)).to.deep.include({ lora_id: null, lora_name: null, extra_keys: null });
    expect(stored(range(1, 8), LORA)).to.deep.include({ lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] });
    expect(stored(range(1, 8), BOTH)).to.deep.include({ lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']] });
    expect(stored(range(1, 12), SALT)).to.deep.include({ lora_id: null, lora_name: null, extra_keys: [['tenant-a'], null, null] });
    // A salted chain extended past its cached root: no block of the event is a first block.
    const tail = stored(range(1, 16), SALT);
    expect(tail).to.deep.include({ parent_block_hash: p.hashesOf(range(1, 12), SALT)[2], extra_keys: null });
    expect(tail.block_hashes).to.deep.equal([p.hashesOf(range(1, 16), SALT)[3]]);
  });

  it('§11.8 snapshot blocks carry lora_name, lora_id and extra_keys as their one-hash BlockStored would', () => {
    const p = pool();
    p.admitPrompt(range(1, 8), BOTH);
    p.admitPrompt(range(21, 4));
    const [root, child, plain] = p.snapshot();
    expect(root).to.deep.include({ lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a']] });
    expect(child).to.deep.include({ lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora']] });
    expect(plain).to.not.have.any.keys('lora_id', 'lora_name', 'extra_keys');
  });

  it('§11 obligations and snapshot = replayed events hold for identity traffic with offload (replica notices keep the identity)', () => {
    const opts = { blockSize: 4, deviceCapacityBlocks: 3, hostCapacityBlocks: 4 };
    const p = new BlockPool(opts);
    const ref = new ObligationChecker(4);
    const ids: AdmitOptions[] = [PLAIN, { loraName: 'sql-lora' }, SALT, { loraName: 'sql-lora', cacheSalt: 'tenant-a' }];
    for (let i = 0; i < 24; i++) {
      const id = ids[i % ids.length]!;
      const tokens = range(1 + (i % 3) * 100, 4 + (i % 4) * 4);
      const expected = ref.prefixHits(p.hashesOf(tokens, id));
      const r = p.admitPrompt(tokens, id);
      ref.apply(r.events);
      expect({ device: r.hitBlocks, hostOnly: r.hostHitBlocks }).to.deep.equal(expected);
      for (const e of r.events as Ev[]) {
        if (e.type !== 'BlockStored') continue;
        const keys = e.extra_keys as (string[] | null)[] | null;
        if (keys !== null) expect(keys, 'one extra_keys entry per hash').to.have.length((e.block_hashes as unknown[]).length);
        if (e.lora_name !== null) for (const k of keys ?? []) expect(k?.[0], 'LoRA name leads every entry').to.equal(e.lora_name);
      }
    }
    expectSnapshotMatches(p.snapshot(), ref);
  });
});

describe('engine-sim hybrid model: a sliding-window group beside full attention (cache-identity §6, §4 rule 4)', () => {
  const WINDOW = 6;

  it('CI4 group 0 is full_attention (group_idx 0), group 1 re-publishes every Device store with the same hashes and its spec', () => {
    const p = pool({ slidingWindowTokens: WINDOW });
    const r = p.admitPrompt(range(1, 16));
    const hashes = p.hashesOf(range(1, 16));
    const [g0] = ofGroup(r.events, 0);
    const g1 = ofGroup(r.events, 1);
    expect(g0).to.deep.include({ type: 'BlockStored', block_hashes: hashes, group_idx: 0, kv_cache_spec_kind: 'full_attention', token_ids: range(1, 16) });
    expect(g0).to.not.have.property('kv_cache_spec_sliding_window');
    expect(g1[0]).to.deep.include({
      type: 'BlockStored',
      block_hashes: hashes,
      parent_block_hash: null,
      token_ids: range(1, 16),
      group_idx: 1,
      kv_cache_spec_kind: 'sliding_window',
      kv_cache_spec_sliding_window: WINDOW,
    });
    // Group 0's events come first in the step, as vLLM's per-group managers emit them.
    expect((r.events as Ev[]).map((e) => e.group_idx)).to.deep.equal([0, 1, 1]);
  });

  it('CI4 group 1 removes the blocks a request window has passed: the first floor((tokens − window + 1) / block_size)', () => {
    const p = pool({ slidingWindowTokens: WINDOW });
    // 16 tokens, window 6: tokens 0..10 are outside → blocks 0 and 1 (11 / 4 = 2).
    const r = p.admitPrompt(range(1, 16));
    const hashes = p.hashesOf(range(1, 16));
    expect(ofGroup(r.events, 1)[1]).to.deep.equal({ type: 'BlockRemoved', block_hashes: hashes.slice(0, 2), medium: 'gpu', group_idx: 1 });
    expect(hashes.map((h) => p.inSlidingGroup(h))).to.deep.equal([false, false, true, true]);
    // Group 0 still holds the whole prompt: the next request gets full credit.
    for (const h of hashes) expect(p.tiersOf(h)).to.equal(1);
    expect(p.admitPrompt(range(1, 16)).hitBlocks).to.equal(4);
    // A prompt shorter than the window keeps every block in group 1.
    const short = p.admitPrompt(range(101, 4));
    expect(ofGroup(short.events, 1).map((e) => e.type)).to.deep.equal(['BlockStored']);
  });

  it('CI4 a group 0 Device eviction leaves group 1 too; AllBlocksCleared (no group) empties both', () => {
    const p = pool({ slidingWindowTokens: 64, deviceCapacityBlocks: 2 });
    p.admitPrompt(range(1, 8));
    const [a0, a1] = p.hashesOf(range(1, 8));
    const r = p.admitPrompt(range(101, 4));
    const removed = (r.events as Ev[]).filter((e) => e.type === 'BlockRemoved');
    expect(removed).to.deep.equal([
      { type: 'BlockRemoved', block_hashes: [a1], medium: 'gpu', group_idx: 0 },
      { type: 'BlockRemoved', block_hashes: [a1], medium: 'gpu', group_idx: 1 },
    ]);
    expect(p.inSlidingGroup(a0)).to.equal(true);
    expect(p.clear()).to.deep.equal([{ type: 'AllBlocksCleared', medium: null }]);
    expect(p.inSlidingGroup(a0)).to.equal(false);
  });

  it('CI4 property: group 0 residency, hits and events equal a plain pool given the same prompts; group 1 ⊆ group 0 Device', () => {
    fc.assert(
      fc.property(
        smallPoolCaps(),
        fc.integer({ min: 1, max: 20 }),
        fc.array(sharedPrefixPrompt(), { minLength: 1, maxLength: 20 }),
        (caps, slidingWindowTokens, prompts) => {
          const plain = new BlockPool({ blockSize: 4, ...caps });
          const hybrid = new BlockPool({ blockSize: 4, ...caps, slidingWindowTokens });
          const ref = new ObligationChecker(4);
          const model = new ResidencyModel();
          for (const p of prompts) {
            const a = plain.admitPrompt(p);
            const b = hybrid.admitPrompt(p);
            expect({ device: b.hitBlocks, host: b.hostHitBlocks }).to.deep.equal({ device: a.hitBlocks, host: a.hostHitBlocks });
            const group0 = ofGroup(b.events, 0).map((e) => {
              expect(e.group_idx).to.equal(0);
              const { group_idx: _g, kv_cache_spec_kind: _k, ...rest } = e;
              return rest;
            });
            expect(group0).to.deep.equal(a.events);
            ref.apply(group0 as WireEvent[]);
            model.apply(b.events);
            for (const h of hybrid.hashesOf(p)) if (hybrid.inSlidingGroup(h)) expect(hybrid.tiersOf(h) & 1, 'group 1 only holds Device blocks').to.equal(1);
          }
          expectSnapshotMatches(hybrid.snapshot(), ref);
          // The residency model a bare publisher answers snapshots from ignores group 1.
          expect(model.size).to.equal(ref.blocks.size);
        },
      ),
      { numRuns: 200, seed: 2048 },
    );
  });

  it('§7.3 full-state events of a hybrid pool restate group 1 after group 0', () => {
    const p = pool({ slidingWindowTokens: WINDOW });
    p.admitPrompt(range(1, 16));
    const events = p.fullStateEvents() as Ev[];
    expect(events[0]).to.deep.equal({ type: 'AllBlocksCleared', medium: null });
    const hashes = p.hashesOf(range(1, 16));
    expect(ofGroup(events.slice(1), 0)[0]!.block_hashes).to.deep.equal(hashes);
    expect(ofGroup(events.slice(1), 1).map((e) => e.block_hashes)).to.deep.equal([hashes.slice(2)]);
  });
});
