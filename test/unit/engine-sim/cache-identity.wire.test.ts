// Identity and group fields of the simulator's events, byte for byte against vLLM's field layout
// (vllm/distributed/kv_events.py, msgspec structs, tag=True, omit_defaults=True): map events as
// newer vLLM ships them, positional events as the array_like releases did (cache-identity §6,
// kv-events §3.2). Expected bytes are written out by hand from MessagePack's format, so an
// encoder bug cannot hide behind the encoder.
import { expect } from 'chai';
import { planBatches } from '../../../tools/engine-sim/batch-splitter.js';
import { EventBuilder, type KvCacheGroup, type StoredBlockIdentity } from '../../../tools/engine-sim/event-builder.js';
import { ResidencyModel } from '../../../tools/engine-sim/residency-model.js';
import { WireEncoder } from '../../../tools/engine-sim/wire-encoding.js';
import type { WireEvent } from '../../../tools/engine-sim/wire-types.js';

/** Hex bytes and fixstr strings, concatenated: `bytes('89', s('type'), ...)`. */
function bytes(...parts: (string | Uint8Array)[]): string {
  return parts.map((p) => (typeof p === 'string' ? p.replace(/\s+/g, '') : Buffer.from(p).toString('hex'))).join('');
}
function s(text: string): Uint8Array {
  const utf8 = Buffer.from(text, 'utf8');
  expect(utf8.length).to.be.below(32);
  return Buffer.concat([Buffer.from([0xa0 | utf8.length]), utf8]);
}
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const TOKENS_1_8 = '98 01 02 03 04 05 06 07 08';

const PLAIN: StoredBlockIdentity = { loraName: null, loraId: null, extraKey: null };
const ROOT_BOTH: StoredBlockIdentity = { loraName: 'sql-lora', loraId: 1, extraKey: ['sql-lora', 'tenant-a'] };
const CHAIN_LORA: StoredBlockIdentity = { loraName: 'sql-lora', loraId: 1, extraKey: ['sql-lora'] };
const ROOT_SALT: StoredBlockIdentity = { loraName: null, loraId: null, extraKey: ['tenant-a'] };
const SLIDING: KvCacheGroup = { idx: 1, kind: 'sliding_window', slidingWindowTokens: 6 };
const FULL: KvCacheGroup = { idx: 0, kind: 'full_attention', slidingWindowTokens: null };

/** One two-block store of hashes 11 and 12, tokens 1..8, as the pool's builder shapes it. */
function twoBlocks(root: StoredBlockIdentity, child: StoredBlockIdentity, group: KvCacheGroup | null = null): WireEvent {
  const b = new EventBuilder(4, group);
  b.stored(11n, null, [1, 2, 3, 4], 'gpu', root);
  b.stored(12n, 11n, [5, 6, 7, 8], 'gpu', child);
  const events = b.finish();
  expect(events, 'one merged event').to.have.length(1);
  return events[0]!;
}

describe('engine-sim identity and group fields on the wire (cache-identity §6, vLLM 0.19+ layout)', () => {
  const map = new WireEncoder('map');
  const array = new WireEncoder('array');

  it('§6 plain blocks keep their exact map bytes: nil lora_id, lora_name, extra_keys, no group fields', () => {
    const e = twoBlocks(PLAIN, PLAIN);
    expect(hex(map.encodeEvent(e))).to.equal(
      bytes('89', s('type'), s('BlockStored'), s('block_hashes'), '92 0b 0c', s('parent_block_hash'), 'c0', s('token_ids'), TOKENS_1_8,
        s('block_size'), '04', s('lora_id'), 'c0', s('medium'), s('gpu'), s('lora_name'), 'c0', s('extra_keys'), 'c0'),
    );
    // Positional: the seven fields without a default always, trailing nil defaults left off.
    expect(hex(array.encodeEvent(e))).to.equal(bytes('98', s('BlockStored'), '92 0b 0c c0', TOKENS_1_8, '04 c0', s('gpu'), 'c0'));
  });

  it('§6 LoRA + salt: lora_id, lora_name, extra_keys [[lora, salt], [lora]] in map and positional form', () => {
    const e = twoBlocks(ROOT_BOTH, CHAIN_LORA);
    const extra = bytes('92', '92', s('sql-lora'), s('tenant-a'), '91', s('sql-lora'));
    expect(hex(map.encodeEvent(e))).to.equal(
      bytes('89', s('type'), s('BlockStored'), s('block_hashes'), '92 0b 0c', s('parent_block_hash'), 'c0', s('token_ids'), TOKENS_1_8,
        s('block_size'), '04', s('lora_id'), '01', s('medium'), s('gpu'), s('lora_name'), s('sql-lora'), s('extra_keys'), extra),
    );
    expect(hex(array.encodeEvent(e))).to.equal(bytes('99', s('BlockStored'), '92 0b 0c c0', TOKENS_1_8, '04 01', s('gpu'), s('sql-lora'), extra));
  });

  it('§6 salt only: extra_keys [[salt], nil]: the salt on block 0, nil for the block with a parent', () => {
    const e = twoBlocks(ROOT_SALT, PLAIN);
    const extra = bytes('92', '91', s('tenant-a'), 'c0');
    expect(hex(map.encodeEvent(e))).to.equal(
      bytes('89', s('type'), s('BlockStored'), s('block_hashes'), '92 0b 0c', s('parent_block_hash'), 'c0', s('token_ids'), TOKENS_1_8,
        s('block_size'), '04', s('lora_id'), 'c0', s('medium'), s('gpu'), s('lora_name'), 'c0', s('extra_keys'), extra),
    );
    expect(hex(array.encodeEvent(e))).to.equal(bytes('99', s('BlockStored'), '92 0b 0c c0', TOKENS_1_8, '04 c0', s('gpu'), 'c0', extra));
  });

  it('CI4 hybrid: group_idx, kv_cache_spec_kind and the window on stores, group_idx on removals, in both forms', () => {
    const g1 = twoBlocks(PLAIN, PLAIN, SLIDING);
    const groupMap = bytes(s('group_idx'), '01', s('kv_cache_spec_kind'), s('sliding_window'), s('kv_cache_spec_sliding_window'), '06');
    expect(hex(map.encodeEvent(g1))).to.equal(
      bytes('8c', s('type'), s('BlockStored'), s('block_hashes'), '92 0b 0c', s('parent_block_hash'), 'c0', s('token_ids'), TOKENS_1_8,
        s('block_size'), '04', s('lora_id'), 'c0', s('medium'), s('gpu'), s('lora_name'), 'c0', s('extra_keys'), 'c0', groupMap),
    );
    // Positional: extra_keys stays as nil because group fields follow it.
    expect(hex(array.encodeEvent(g1))).to.equal(bytes('9c', s('BlockStored'), '92 0b 0c c0', TOKENS_1_8, '04 c0', s('gpu'), 'c0 c0 01', s('sliding_window'), '06'));
    const g0 = twoBlocks(PLAIN, PLAIN, FULL);
    expect(hex(array.encodeEvent(g0))).to.equal(bytes('9b', s('BlockStored'), '92 0b 0c c0', TOKENS_1_8, '04 c0', s('gpu'), 'c0 c0 00', s('full_attention')));

    const removal = new EventBuilder(4, SLIDING);
    removal.removed(11n, 'gpu');
    const [removed] = removal.finish();
    expect(hex(map.encodeEvent(removed!))).to.equal(bytes('84', s('type'), s('BlockRemoved'), s('block_hashes'), '91 0b', s('medium'), s('gpu'), s('group_idx'), '01'));
    expect(hex(array.encodeEvent(removed!))).to.equal(bytes('94', s('BlockRemoved'), '91 0b', s('gpu'), '01'));
    const plainRemoval = new EventBuilder(4);
    plainRemoval.removed(11n, 'gpu');
    expect(hex(array.encodeEvent(plainRemoval.finish()[0]!))).to.equal(bytes('93', s('BlockRemoved'), '91 0b', s('gpu')));
  });

  it('positional AllBlocksCleared has no fields; a one-tier clear has no positional form and stays a map (§3.2)', () => {
    expect(hex(array.encodeEvent({ type: 'AllBlocksCleared', medium: null }))).to.equal(bytes('91', s('AllBlocksCleared')));
    expect(hex(array.encodeEvent({ type: 'AllBlocksCleared', medium: 'cpu' }))).to.equal(bytes('82', s('type'), s('AllBlocksCleared'), s('medium'), s('cpu')));
  });

  it('§11.3 an oversized identity store is cut at a block boundary with its extra_keys entries', () => {
    const b = new EventBuilder(4);
    b.stored(11n, null, [1, 2, 3, 4], 'gpu', ROOT_BOTH);
    for (let h = 12n; h < 20n; h++) b.stored(h, h - 1n, [5, 6, 7, 8], 'gpu', CHAIN_LORA);
    const [event] = b.finish() as Record<string, unknown>[];
    expect(event!.extra_keys).to.have.length(9);
    const batches = planBatches(map, [event as WireEvent], 0, 260);
    expect(batches.length).to.be.greaterThan(1);
    let blocks = 0;
    for (const batch of batches) {
      for (const e of batch.events as Record<string, unknown>[]) {
        const hashes = e.block_hashes as bigint[];
        expect(e.extra_keys).to.have.length(hashes.length);
        expect((e.extra_keys as string[][])[0]).to.deep.equal(blocks === 0 ? ['sql-lora', 'tenant-a'] : ['sql-lora']);
        blocks += hashes.length;
      }
    }
    expect(blocks).to.equal(9);
  });

  it('§11.8 the residency model keeps each block its own extra_keys entry and ignores groups other than 0', () => {
    const model = new ResidencyModel();
    model.apply([twoBlocks(ROOT_BOTH, CHAIN_LORA)]);
    const side = new EventBuilder(4, SLIDING);
    side.stored(40n, null, [9, 9, 9, 9], 'gpu', PLAIN);
    side.removed(11n, 'gpu');
    model.apply(side.finish());
    model.apply([['BlockRemoved', [12n], 'gpu', 1]]);
    expect(model.snapshot()).to.deep.equal([
      { block_hash: 11n, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['gpu'], lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a']] },
      { block_hash: 12n, parent_block_hash: 11n, token_ids: [5, 6, 7, 8], media: ['gpu'], lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora']] },
    ]);
  });
});
