// cache-identity §3–§4 at index level: vLLM- and SGLang-shaped events (encoded with a reference
// MessagePack encoder, decoded by the directory's decoder) applied to a StreamIndex, then matched
// through the shared group index (the query path) under each identity. CI1 LoRA, CI2 salt, CI3
// multimodal and embeddings, CI4 hybrid groups, CI8 SGLang salt forms / REMOTE locality / lora_id
// alone, §4 rule 6 (re-emitted stores), and the group-selection decision.
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import { ContentKeyHasher, contentKeyHex } from '../../../shared/keys/content-key.js';
import { PLAIN_IDENTITY, keyIdentity, type KeyIdentity } from '../../../shared/keys/cache-identity.js';
import type { KvEvent } from '../../../directory-svc/decoder/kv-batch.js';
import { decodeBatchPayload } from '../../../directory-svc/decoder/live-frame-decoder.js';
import { CacheGroupSelection } from '../../../directory-svc/index/cache-group-selection.js';
import { StreamIndex, type SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { groupHits } from '../../helpers/index-prefix.js';
import { errorClassOf, noSkips, range } from './index-fixtures.js';

const BS = 4;
const LORA = keyIdentity('sql-lora', null);
const SALT = keyIdentity(null, 'tenant-a');
const BOTH_ID = keyIdentity('sql-lora', 'tenant-a');

let hasher: ContentKeyHasher;
before(async () => {
  hasher = await ContentKeyHasher.forSeed(1024);
});

/** Decodes events as a vllm/sglang stream does (engines.md §2: rank optional). */
function decode(events: unknown[]): KvEvent[] {
  const payload = encode([1700000000.5, events], { useBigInt64: true });
  return decodeBatchPayload(payload, 0n, payload.length, { dpRank: 0, historyKindRules: true }).events;
}

/** vLLM 0.19+ BlockStored (map form, omit_defaults: absent optional fields). */
function vllmStored(hashes: number[], parent: number | null, tokens: number[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: tokens, block_size: BS, lora_id: null, medium: 'GPU', lora_name: null, group_idx: 0, kv_cache_spec_kind: 'full_attention', ...extra };
}

function newIndex(cacheGroup?: CacheGroupSelection): StreamIndex {
  return new StreamIndex({ blockSize: BS, hasher, maxEntries: 1000, ...(cacheGroup === undefined ? {} : { cacheGroup }) });
}

function apply(index: StreamIndex, events: unknown[], skipped: SkipCounters = noSkips()): SkipCounters {
  index.applyEvents(decode(events), skipped);
  return skipped;
}

/** Hit tokens (device + host-only) of `tokens` under `identity` through the shared group index. */
function hitTokens(index: StreamIndex, tokens: number[], identity: KeyIdentity = PLAIN_IDENTITY): number {
  const h = groupHits(index, tokens, identity);
  return (h.deviceBlocks + h.hostOnlyBlocks) * BS;
}

/** The index's resident content keys, hex, sorted. */
function residentKeys(index: StreamIndex): string[] {
  const r = index.exportResidency();
  const out: string[] = [];
  for (let i = 0; i < r.tiers.length; i++) out.push(contentKeyHex(r.keys, i * 16));
  return out.sort();
}

function chainHex(tokens: number[], identity: KeyIdentity): string[] {
  const keys = hasher.chain(tokens, BS, undefined, identity);
  return Array.from({ length: keys.length / 16 }, (_, i) => contentKeyHex(keys, i * 16));
}

const T8 = range(1, 8);

describe('cache-identity §4 index (CI1–CI4, CI8, rule 6)', () => {
  it('CI1 LoRA chain keys equal chain(tokens, keyIdentity(lora, null)) (the §3 vectors) and nothing else', () => {
    const index = newIndex();
    const skipped = apply(index, [vllmStored([11, 12], null, T8, { lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] })]);
    expect(residentKeys(index)).to.deep.equal(chainHex(T8, LORA).sort());
    expect(chainHex(T8, LORA)).to.deep.equal(['b991f11bf97aab27422405a07b599fc3', '9cd8b53134746ed3ebfc6d70cb377c89']);
    expect(skipped).to.deep.equal(noSkips());
  });

  it('CI1 LoRA blocks are credited to that LoRA only; a base request gets none on them, a LoRA request none on base blocks', () => {
    const index = newIndex();
    apply(index, [vllmStored([11, 12], null, T8, { lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] })]);
    expect(hitTokens(index, T8, LORA)).to.equal(8);
    expect(hitTokens(index, T8)).to.equal(0);
    expect(hitTokens(index, T8, keyIdentity('other-lora', null))).to.equal(0);
    expect(hitTokens(index, T8, BOTH_ID)).to.equal(0);
    // The base model's chain of the same tokens beside it, then the LoRA chain evicted.
    apply(index, [vllmStored([21, 22], null, T8), { type: 'BlockRemoved', block_hashes: [11, 12], medium: 'GPU', group_idx: 0 }]);
    expect(hitTokens(index, T8)).to.equal(8);
    expect(hitTokens(index, T8, LORA)).to.equal(0);
  });

  it('CI1 a LoRA chain continued in a later event (parent set) keys its blocks with the LoRA term; lora_name without extra_keys is the same identity', () => {
    const index = newIndex();
    apply(index, [vllmStored([11], null, range(1, 4), { lora_name: 'sql-lora' }), vllmStored([12], 11, range(5, 8), { lora_name: 'sql-lora', extra_keys: [['sql-lora']] })]);
    expect(residentKeys(index)).to.deep.equal(chainHex(T8, LORA).sort());
    expect(hitTokens(index, T8, LORA)).to.equal(8);
  });

  it('CI2 a salt on block 0 keys the chain (the §3 vectors); only requests with that salt are credited', () => {
    const index = newIndex();
    apply(index, [vllmStored([31, 32], null, T8, { extra_keys: [['tenant-a'], null] })]);
    expect(residentKeys(index)).to.deep.equal(chainHex(T8, SALT).sort());
    expect(chainHex(T8, SALT)).to.deep.equal(['56aba034c799380698625157cb7850c0', '398e7f6f39101fd838509a95b3a4bbd2']);
    expect(hitTokens(index, T8, SALT)).to.equal(8);
    expect(hitTokens(index, T8)).to.equal(0);
    expect(hitTokens(index, T8, keyIdentity(null, 'tenant-b'))).to.equal(0);
    // A child event of the salted chain (parent set, no extra keys) continues it.
    apply(index, [vllmStored([33], 32, range(9, 12))]);
    expect(hitTokens(index, range(1, 12), SALT)).to.equal(12);
  });

  it('CI2 LoRA + salt together (the §3 vectors) match only requests with both', () => {
    const index = newIndex();
    apply(index, [vllmStored([41, 42], null, T8, { lora_id: 7, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']] })]);
    expect(chainHex(T8, BOTH_ID)).to.deep.equal(['62ac9cabbf9bab2d4e612b0714c1f64b', '6cf68ade01b27c11ec28c41b1435e86a']);
    expect(residentKeys(index)).to.deep.equal(chainHex(T8, BOTH_ID).sort());
    expect(hitTokens(index, T8, BOTH_ID)).to.equal(8);
    for (const other of [PLAIN_IDENTITY, LORA, SALT, keyIdentity('sql-lora', 'tenant-b')]) expect(hitTokens(index, T8, other)).to.equal(0);
  });

  it('CI2 a string on a block with a parent is no salt: that block and its descendants are unindexed, counted multimodal', () => {
    const index = newIndex();
    // Block 1's entry holds a string: its parent is block 0.
    let skipped = apply(index, [vllmStored([51, 52, 53], null, range(1, 12), { extra_keys: [['tenant-a'], ['tenant-a'], null] })]);
    expect(skipped.multimodal).to.equal(2);
    expect(hitTokens(index, range(1, 12), SALT)).to.equal(4);
    // A salt-looking string on the first block of an event with a parent: out of scope.
    skipped = apply(index, [vllmStored([61], null, range(1, 4)), vllmStored([62], 61, range(5, 8), { extra_keys: [['tenant-a']] })]);
    expect(skipped.multimodal).to.equal(1);
    expect(hitTokens(index, T8)).to.equal(4);
    expect(hitTokens(index, T8, SALT)).to.equal(4);
  });

  it('CI3 (identifier, offset) items and bin entries are never credited, are counted multimodal, and a text chain beside them is unaffected', () => {
    const index = newIndex();
    const skipped = apply(index, [
      // Block 0 text, blocks 1–2 an image (mm items), then a text block after it in the same event.
      vllmStored([71, 72, 73, 74], null, range(1, 16), { extra_keys: [null, [['img-hash', 2]], [['img-hash', -2]], null] }),
      // Prompt embeddings on block 0.
      vllmStored([81, 82], null, range(101, 108), { extra_keys: [[Buffer.from('embeds-0')], [Buffer.from('embeds-1')]] }),
      // LoRA and an image together.
      vllmStored([91], null, range(201, 204), { lora_name: 'sql-lora', extra_keys: [['sql-lora', ['img-2', 0]]] }),
      // The text chain beside them.
      vllmStored([61, 62], null, range(301, 308)),
    ]);
    expect(skipped).to.deep.equal({ ...noSkips(), multimodal: 3 + 2 + 1 });
    expect(hitTokens(index, range(1, 16))).to.equal(4);
    expect(hitTokens(index, range(101, 108))).to.equal(0);
    expect(hitTokens(index, range(201, 204), LORA)).to.equal(0);
    expect(hitTokens(index, range(301, 308))).to.equal(8);
    // A later event on top of the image block: its blocks descend from an unindexed parent.
    const next = apply(index, [vllmStored([75], 74, range(17, 20))]);
    expect(next).to.deep.equal({ ...noSkips(), descendant: 1 });
    // A replica notice naming multimodal hashes is accepted (they are known, UNINDEXED).
    expect(errorClassOf(() => apply(index, [vllmStored([72, 73], null, [], { medium: 'CPU', extra_keys: [[['img-hash', 2]], [['img-hash', -2]]] })]))).to.equal(null);
    expect(hitTokens(index, range(1, 16))).to.equal(4);
  });

  it('CI3 an unknown multimodal hash in a tokenless notice is ignored and counted, an unknown text hash is inconsistent', () => {
    const index = newIndex();
    expect(apply(index, [vllmStored([99], null, [], { medium: 'CPU', extra_keys: [[['img', 0]]] })]).multimodal).to.equal(1);
    expect(errorClassOf(() => apply(index, [vllmStored([98], null, [], { medium: 'CPU' })]))).to.equal('inconsistent');
  });

  it('CI4 hybrid: group 1 (sliding_window) stores with identical hashes add nothing; its removal leaves group 0 credited; group 0 removal removes it', () => {
    const index = newIndex();
    const sw = { group_idx: 1, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 4096 };
    let skipped = apply(index, [vllmStored([11, 12], null, T8), vllmStored([11, 12], null, T8, sw)]);
    expect([index.entryCount, index.deviceBlocks]).to.deep.equal([2, 2]);
    expect(skipped.group).to.equal(2);
    // A group-1 store that breaks the length rules (other block size, other tokens) is not checked.
    skipped = apply(index, [vllmStored([13, 14], 12, [9, 9, 9], { ...sw, block_size: 16 })]);
    expect(skipped.group).to.equal(2);
    expect(index.entryCount).to.equal(2);
    // Group 1 removal of hash 12: group 0's block stays credited.
    skipped = apply(index, [{ type: 'BlockRemoved', block_hashes: [12], medium: 'GPU', group_idx: 1 }]);
    expect(skipped.group).to.equal(1);
    expect(hitTokens(index, T8)).to.equal(8);
    // Group 0 removal removes it (group_idx absent = 0 too).
    apply(index, [{ type: 'BlockRemoved', block_hashes: [12], medium: 'GPU' }]);
    expect(hitTokens(index, T8)).to.equal(4);
    apply(index, [{ type: 'BlockRemoved', block_hashes: [11], medium: 'GPU', group_idx: 0 }]);
    expect(hitTokens(index, T8)).to.equal(0);
  });

  it('CI4 the lowest reusable group is indexed whatever comes first in a batch (a non-reusable group 0 is never indexed)', () => {
    const index = newIndex();
    // Mamba in group 0, full attention in group 1, sliding window in group 2.
    const skipped = apply(index, [
      vllmStored([11, 12], null, T8, { group_idx: 0, kv_cache_spec_kind: 'mamba' }),
      vllmStored([21, 22], null, T8, { group_idx: 1, kv_cache_spec_kind: 'full_attention' }),
      vllmStored([31, 32], null, T8, { group_idx: 2, kv_cache_spec_kind: 'sliding_window' }),
      vllmStored([41, 42], null, T8, { group_idx: 3, kv_cache_spec_kind: 'some_future_kind' }),
      vllmStored([51, 52], null, T8, { group_idx: 4, kv_cache_spec_kind: 'mla_attention' }),
      { type: 'BlockRemoved', block_hashes: [21], medium: 'GPU', group_idx: 0 },
    ]);
    expect(skipped.group).to.equal(2 + 2 + 2 + 2 + 1);
    expect(hitTokens(index, T8)).to.equal(8);
  });

  it('CI4 decision: a reusable group below the indexed one moves the selection down for good and throws inconsistent (resynchronize); the rebuilt index ignores the old group', () => {
    const selection = new CacheGroupSelection();
    let index = newIndex(selection);
    apply(index, [vllmStored([21, 22], null, T8, { group_idx: 1 })]);
    expect(selection.group).to.equal(1);
    expect(errorClassOf(() => apply(index, [vllmStored([11, 12], null, T8, { group_idx: 0 })]))).to.equal('inconsistent');
    expect(selection.group).to.equal(0);
    // The stream's next index (recovery replays from the start) keeps group 0 only.
    index = newIndex(selection);
    const skipped = apply(index, [vllmStored([21, 22], null, T8, { group_idx: 1 }), vllmStored([11, 12], null, T8, { group_idx: 0 })]);
    expect(skipped.group).to.equal(2);
    expect([index.recordCount, hitTokens(index, T8)]).to.deep.equal([2, 8]);
  });

  it('CI4 kinds that prefix caching reuses are reusable: full_attention, mla_attention, sink_full_attention, and an absent kind', () => {
    for (const kind of ['full_attention', 'mla_attention', 'sink_full_attention', null]) {
      const index = newIndex();
      const skipped = apply(index, [vllmStored([11, 12], null, T8, { kv_cache_spec_kind: kind })]);
      expect([skipped.group ?? 0, hitTokens(index, T8)], String(kind)).to.deep.equal([0, 8]);
    }
    for (const kind of ['sliding_window', 'sliding_window_mla', 'mamba', 'chunked_local_attention', 'encoder_only_attention', 'cross_attention', 'unknown', 'FULL_ATTENTION']) {
      const index = newIndex();
      const skipped = apply(index, [vllmStored([11, 12], null, T8, { kv_cache_spec_kind: kind })]);
      expect([skipped.group, index.recordCount], kind).to.deep.equal([2, 0]);
    }
  });

  it('CI8 SGLang cache_salt in the map form and in the trailing metadata map salts the chain', () => {
    const index = newIndex();
    apply(index, [
      { type: 'BlockStored', block_hashes: [11], parent_block_hash: null, token_ids: range(1, 4), block_size: BS, lora_id: null, medium: 'GPU', cache_salt: 'tenant-a' },
      ['BlockStored', [12], 11, range(5, 8), BS, null, 'GPU'],
      ['BlockStored', [21], null, range(101, 104), BS, null, 'GPU', { cache_salt: 'tenant-a' }],
      ['BlockStored', [22], 21, range(105, 108), BS, null, 'GPU'],
    ]);
    expect(hitTokens(index, T8, SALT)).to.equal(8);
    expect(hitTokens(index, range(101, 108), SALT)).to.equal(8);
    expect(hitTokens(index, T8)).to.equal(0);
    expect(hitTokens(index, range(101, 108))).to.equal(0);
    expect(residentKeys(index)).to.include.members(chainHex(T8, SALT));
  });

  it('CI8 locality "REMOTE" is a tier we do not serve (skipped medium, no credit, children chain); "LOCAL" is served', () => {
    const index = newIndex();
    const skipped = apply(index, [vllmStored([11], null, range(1, 4), { locality: 'REMOTE' }), vllmStored([12], 11, range(5, 8), { locality: 'LOCAL' })]);
    expect(skipped.medium).to.equal(1);
    expect(hitTokens(index, T8)).to.equal(0);
    // Loaded back locally (tokenless GPU notice): the derived key, full hit.
    apply(index, [vllmStored([11], null, [], {})]);
    expect(hitTokens(index, T8)).to.equal(8);
    // A REMOTE removal touches only the unserved tier.
    apply(index, [{ type: 'BlockRemoved', block_hashes: [11], medium: 'GPU', locality: 'REMOTE' }]);
    expect(hitTokens(index, T8)).to.equal(8);
  });

  it('CI8 a lora_id without lora_name is out of scope (counted out_of_scope, never credited, children descendants)', () => {
    const index = newIndex();
    let skipped = apply(index, [vllmStored([11, 12], null, T8, { lora_id: 3 })]);
    expect(skipped).to.deep.equal({ ...noSkips(), outOfScope: 2 });
    expect(hitTokens(index, T8)).to.equal(0);
    skipped = apply(index, [vllmStored([13], 12, range(9, 12))]);
    expect(skipped).to.deep.equal({ ...noSkips(), descendant: 1 });
  });

  it('§4 rule 6 re-emitted stores of known blocks (kv_cache_report_mode="full") count nothing and raise nothing', () => {
    const index = newIndex();
    const all = [
      vllmStored([11, 12], null, T8),
      vllmStored([13], 12, range(9, 12), { medium: 'CPU' }),
      vllmStored([21, 22], null, T8, { lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']] }),
      vllmStored([31, 32], null, T8, { extra_keys: [null, [['img', 0]]] }),
      vllmStored([33], 32, range(9, 12)),
      vllmStored([41], null, range(1, 4), { lora_id: 5 }),
      vllmStored([51], null, range(1, 4), { medium: 'STORAGE' }),
    ];
    const first = apply(index, all);
    expect(first).to.deep.equal({ ...noSkips(), multimodal: 1, descendant: 1, outOfScope: 1, medium: 1 });
    const before = residentKeys(index);
    const entries = index.entryCount;
    for (let round = 0; round < 3; round++) {
      const again = apply(index, all);
      expect(again, `round ${round}`).to.deep.equal(noSkips());
    }
    expect([residentKeys(index), index.entryCount]).to.deep.equal([before, entries]);
  });
});
