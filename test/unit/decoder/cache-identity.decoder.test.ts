// cache-identity §4 in the decoders: every identity field in map and positional events, in live
// batches, history replies (both layouts) and xLLM snapshot chunks; SGLang's salt forms; groups
// and locality; present fields of the wrong type are `parse` naming the field; identities are
// shared instances. Pure functions only (sockets: test/protocol/cache-identity.events.test.ts).
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import { isStreamError } from '../../../directory-svc/errors/stream-errors.js';
import type { BlockRemovedEvent, BlockStoredEvent, KvEvent } from '../../../directory-svc/decoder/kv-batch.js';
import { decodeBatchPayload, type BatchPayloadOptions } from '../../../directory-svc/decoder/live-frame-decoder.js';
import { decodeHistoryMessage } from '../../../directory-svc/decoder/history-decoder.js';
import { decodeSnapshotChunk } from '../../../directory-svc/decoder/snapshot-decoder.js';
import { PLAIN_IDENTITY } from '../../../shared/keys/cache-identity.js';
import { TIER_UNSERVED } from '../../../shared/keys/tier-bits.js';

const enc = (v: unknown): Uint8Array => encode(v, { useBigInt64: true });
const VLLM: BatchPayloadOptions = { dpRank: 0, historyKindRules: true };
const XLLM: BatchPayloadOptions = { dpRank: 0 };

function events(list: unknown[], opts: BatchPayloadOptions = VLLM): KvEvent[] {
  const payload = enc([1700000000.5, list, 0]);
  return decodeBatchPayload(payload, 0n, payload.length, opts).events;
}

function one(e: unknown, opts: BatchPayloadOptions = VLLM): BlockStoredEvent {
  const got = events([e], opts)[0]!;
  if (got.kind !== 'stored') throw new Error(`expected stored, got ${got.kind}`);
  return got;
}

/** The identity-related view of a decoded BlockStored. */
function view(e: BlockStoredEvent): Record<string, unknown> {
  return { lora: e.identity.loraName, salt: e.identity.salt, outOfScope: e.outOfScope, reproducible: e.reproducibleBlocks, group: e.group, reusable: e.reusableGroup, tier: e.tier };
}

function parseError(fn: () => unknown, field: RegExp): void {
  let thrown: unknown = null;
  try {
    fn();
  } catch (e) {
    thrown = e;
  }
  expect(isStreamError(thrown), String(thrown)).to.equal(true);
  if (!isStreamError(thrown)) return;
  expect(thrown.class, thrown.message).to.equal('parse');
  expect(thrown.detail).to.match(field);
}

const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];

/** vLLM 0.19+ BlockStored, map form (omit_defaults: absent optional fields). */
function mapStored(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: TOKENS, block_size: 4, lora_id: null, medium: 'GPU', lora_name: null, ...fields };
}

/** The same event positionally: [tag, hashes, parent, tokens, bs, lora_id, medium, lora_name, extra_keys, group_idx, kind, window, locality]. */
function positional(f: { lora_id?: unknown; medium?: unknown; lora_name?: unknown; extra_keys?: unknown; group_idx?: unknown; kind?: unknown; window?: unknown; locality?: unknown; parent?: unknown } = {}): unknown[] {
  return ['BlockStored', [11, 12], f.parent ?? null, TOKENS, 4, f.lora_id ?? null, f.medium ?? 'GPU', f.lora_name ?? null, f.extra_keys ?? null, f.group_idx ?? null, f.kind ?? null, f.window ?? null, f.locality ?? null];
}

describe('cache-identity §4 decoder', () => {
  describe('vLLM fields, map and positional forms', () => {
    const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
      ['plain, group 0 full_attention', { group_idx: 0, kv_cache_spec_kind: 'full_attention', kv_cache_spec_sliding_window: null }, { lora: null, salt: null, outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: 1 }],
      ['LoRA in lora_name and extra_keys', { lora_id: 1, lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] }, { lora: 'sql-lora', salt: null, outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: 1 }],
      ['salt on block 0', { extra_keys: [['tenant-a'], null] }, { lora: null, salt: 'tenant-a', outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: 1 }],
      ['LoRA then salt on block 0', { lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']] }, { lora: 'sql-lora', salt: 'tenant-a', outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: 1 }],
      ['multimodal item on block 1', { extra_keys: [null, [['img', 0]]] }, { lora: null, salt: null, outOfScope: false, reproducible: 1, group: 0, reusable: true, tier: 1 }],
      ['embedding bin on block 0', { extra_keys: [[new Uint8Array([1, 2])], null] }, { lora: null, salt: null, outOfScope: false, reproducible: 0, group: 0, reusable: true, tier: 1 }],
      ['LoRA not leading: its name stays a key part (block 0 unreproducible)', { lora_name: 'a', extra_keys: [['b', 'a'], null] }, { lora: 'a', salt: null, outOfScope: false, reproducible: 0, group: 0, reusable: true, tier: 1 }],
      ['two strings after the LoRA', { lora_name: 'a', extra_keys: [['a', 's', 't'], null] }, { lora: 'a', salt: null, outOfScope: false, reproducible: 0, group: 0, reusable: true, tier: 1 }],
      ['sliding-window group 1', { group_idx: 1, kv_cache_spec_kind: 'sliding_window', kv_cache_spec_sliding_window: 4096 }, { lora: null, salt: null, outOfScope: false, reproducible: 2, group: 1, reusable: false, tier: 1 }],
      ['REMOTE locality', { locality: 'REMOTE' }, { lora: null, salt: null, outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: TIER_UNSERVED }],
      ['remote, any case', { locality: 'Remote' }, { lora: null, salt: null, outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: TIER_UNSERVED }],
      ['LOCAL locality on CPU', { locality: 'LOCAL', medium: 'CPU' }, { lora: null, salt: null, outOfScope: false, reproducible: 2, group: 0, reusable: true, tier: 2 }],
      ['lora_id without lora_name', { lora_id: 4 }, { lora: null, salt: null, outOfScope: true, reproducible: 0, group: 0, reusable: true, tier: 1 }],
    ];
    for (const [name, fields, want] of cases) {
      it(`CI8/D2 map form: ${name}`, () => {
        expect(view(one(mapStored(fields)))).to.deep.equal(want);
      });
      it(`CI8/D2 positional form: ${name}`, () => {
        const p = positional({
          lora_id: fields['lora_id'],
          medium: fields['medium'],
          lora_name: fields['lora_name'],
          extra_keys: fields['extra_keys'],
          group_idx: fields['group_idx'],
          kind: fields['kv_cache_spec_kind'],
          window: fields['kv_cache_spec_sliding_window'],
          locality: fields['locality'],
        });
        expect(view(one(p))).to.deep.equal(want);
      });
    }

    it('a salt string on a parented event is no salt; the chain continues under its LoRA', () => {
      expect(view(one(mapStored({ parent_block_hash: 10, lora_name: 'a', extra_keys: [['a', 'tenant-a'], ['a']] })))).to.include({ lora: 'a', salt: null, reproducible: 0 });
      expect(view(one(mapStored({ parent_block_hash: 10, lora_name: 'a', extra_keys: [['a'], ['a']] })))).to.include({ lora: 'a', salt: null, reproducible: 2 });
    });

    it('extra_keys shorter than the hashes: missing entries are nil; longer: the rest is ignored', () => {
      expect(one(mapStored({ extra_keys: [['tenant-a']] })).reproducibleBlocks).to.equal(2);
      expect(one(mapStored({ extra_keys: [null, null, [['img', 0]]] })).reproducibleBlocks).to.equal(2);
    });

    it('an empty lora_name or salt is out of scope (no request can name it)', () => {
      expect(view(one(mapStored({ lora_name: '' })))).to.include({ outOfScope: true, lora: null });
      expect(view(one(mapStored({ extra_keys: [[''], null] })))).to.include({ outOfScope: true, salt: null });
    });

    it('BlockRemoved group_idx and locality, map and positional; AllBlocksCleared locality', () => {
      const got = events([
        { type: 'BlockRemoved', block_hashes: [11], medium: 'GPU', group_idx: 1 },
        ['BlockRemoved', [11], 'CPU', 2, 'REMOTE'],
        ['BlockRemoved', [11]],
        { type: 'AllBlocksCleared', locality: 'REMOTE' },
      ]);
      expect(got.slice(0, 3).map((e) => [(e as BlockRemovedEvent).tier, (e as BlockRemovedEvent).group])).to.deep.equal([[1, 1], [TIER_UNSERVED, 2], [1, 0]]);
      expect(got[3]).to.deep.equal({ kind: 'cleared', tiers: TIER_UNSERVED });
    });

    it('rule 5: ownership, session_id and other new keys are ignored; REMOTE is unserved on xllm streams too', () => {
      expect(view(one(mapStored({ ownership: 'shared', session_id: 7, snapshot_version: [1] })))).to.include({ outOfScope: false, tier: 1 });
      expect(one(mapStored({ medium: 'gpu', locality: 'REMOTE' }), XLLM).tier).to.equal(TIER_UNSERVED);
    });
  });

  describe('CI8 SGLang salt forms', () => {
    it('CI8 map form: a cache_salt field salts the parentless first block', () => {
      expect(view(one({ type: 'BlockStored', block_hashes: [11], parent_block_hash: null, token_ids: [1, 2, 3, 4], block_size: 4, lora_id: null, medium: 'GPU', cache_salt: 's1' }))).to.include({ salt: 's1', lora: null });
    });

    it('CI8 array form: a trailing metadata map {"cache_salt": s} (BlockStoredWithMetadata) salts it', () => {
      expect(view(one(['BlockStored', [11], null, [1, 2, 3, 4], 4, null, 'GPU', { cache_salt: 's1' }]))).to.include({ salt: 's1', outOfScope: false, reproducible: 1 });
      // A metadata map also works in the map form, and after the vLLM positions.
      expect(one(mapStored({ metadata: { cache_salt: 's2', other: 1 } })).identity.salt).to.equal('s2');
      expect(one([...positional(), { cache_salt: 's3' }]).identity.salt).to.equal('s3');
    });

    it('CI8 the salt belongs to a parentless first block only; the field wins over metadata; a conflicting extra_keys salt is out of scope', () => {
      expect(one(['BlockStored', [12], 11, [5, 6, 7, 8], 4, null, 'GPU', { cache_salt: 's1' }]).identity).to.equal(PLAIN_IDENTITY);
      expect(one(mapStored({ cache_salt: 'field', metadata: { cache_salt: 'meta' } })).identity.salt).to.equal('field');
      expect(one(mapStored({ cache_salt: 'a', extra_keys: [['a']] })).identity.salt).to.equal('a');
      expect(one(mapStored({ cache_salt: 'a', extra_keys: [['b']] })).outOfScope).to.equal(true);
      expect(one(mapStored({ cache_salt: '' })).outOfScope).to.equal(true);
      expect(one(mapStored({ cache_salt: null, metadata: null })).identity).to.equal(PLAIN_IDENTITY);
    });
  });

  describe('history replies and snapshot chunks', () => {
    it('a history message (both layouts) decodes identity fields like a live batch', () => {
      const payload = enc([1.5, [mapStored({ lora_name: 'sql-lora', extra_keys: [['sql-lora', 'tenant-a'], ['sql-lora']], group_idx: 1, kv_cache_spec_kind: 'mla_attention' })]]);
      const seq = new Uint8Array(8);
      seq[7] = 3;
      const opts = { ...VLLM, topic: new Uint8Array(0), maxMessageBytes: 1 << 20 };
      for (const frames of [[new Uint8Array(0), seq, payload], [new Uint8Array(0), new Uint8Array(0), seq, payload]]) {
        const m = decodeHistoryMessage(frames, opts);
        if (m.kind !== 'batch') throw new Error('expected a batch');
        expect(view(m.batch.events[0] as BlockStoredEvent)).to.deep.equal({ lora: 'sql-lora', salt: 'tenant-a', outOfScope: false, reproducible: 2, group: 1, reusable: true, tier: 1 });
      }
    });

    it('xLLM snapshot blocks carry their own lora_name and extra_keys entry (or a one-element per-hash list)', () => {
      const block = (h: number, parent: number | null, extra: Record<string, unknown>): Record<string, unknown> => ({ block_hash: h, parent_block_hash: parent, token_ids: [1, 2, 3, 4], media: ['gpu'], ...extra });
      const blocks = decodeSnapshotChunk(
        enc({
          dp_rank: 0,
          block_size: 4,
          blocks: [
            block(1, null, { lora_name: 'sql-lora', lora_id: 2, extra_keys: ['sql-lora', 'tenant-a'] }),
            block(2, 1, { lora_name: 'sql-lora', extra_keys: [['sql-lora']] }),
            block(3, null, { extra_keys: [['tenant-b']] }),
            block(4, 3, { extra_keys: ['tenant-b'] }),
            block(5, null, { extra_keys: [['img', 0]] }),
            block(6, null, { extra_keys: [new Uint8Array([9])] }),
            block(7, null, { lora_id: 3 }),
            block(8, null, { extra_keys: [null] }),
          ],
        }),
        { dpRank: 0, blockSize: 4, maxMessageBytes: 1 << 20 },
      );
      expect(blocks.map((b) => [b.identity.loraName, b.identity.salt, b.outOfScope, b.multimodal])).to.deep.equal([
        ['sql-lora', 'tenant-a', false, false],
        ['sql-lora', null, false, false],
        [null, 'tenant-b', false, false],
        [null, null, false, true],
        [null, null, false, true],
        [null, null, false, true],
        [null, null, true, false],
        [null, null, false, false],
      ]);
    });
  });

  describe('present fields of the wrong type are parse errors naming the field', () => {
    const wrong: Array<[string, Record<string, unknown>, RegExp]> = [
      ['lora_name 5', { lora_name: 5 }, /lora_name/],
      ['lora_id "7"', { lora_id: '7' }, /lora_id/],
      ['extra_keys "x"', { extra_keys: 'x' }, /extra_keys/],
      ['extra_keys {}', { extra_keys: {} }, /extra_keys/],
      ['group_idx "0"', { group_idx: '0' }, /group_idx/],
      ['group_idx -1', { group_idx: -1 }, /group_idx/],
      ['group_idx 2^31', { group_idx: 2 ** 31 }, /group_idx/],
      ['group_idx 1.5', { group_idx: 1.5 }, /group_idx/],
      ['kv_cache_spec_kind 3', { kv_cache_spec_kind: 3 }, /kv_cache_spec_kind/],
      ['kv_cache_spec_sliding_window "x"', { kv_cache_spec_sliding_window: 'x' }, /kv_cache_spec_sliding_window/],
      ['locality 1', { locality: 1 }, /locality/],
      ['cache_salt 1', { cache_salt: 1 }, /cache_salt/],
      ['metadata "x"', { metadata: 'x' }, /metadata/],
      ['metadata.cache_salt 2', { metadata: { cache_salt: 2 } }, /metadata\.cache_salt/],
    ];
    for (const [name, fields, field] of wrong) {
      it(`${name} → parse`, () => parseError(() => one(mapStored(fields)), field));
    }

    it('positional wrong types name the field too', () => {
      parseError(() => one(positional({ lora_name: 5 })), /lora_name/);
      parseError(() => one(positional({ extra_keys: 'x' })), /extra_keys/);
      parseError(() => one(positional({ group_idx: 'x' })), /group_idx/);
      parseError(() => one(positional({ kind: 1 })), /kv_cache_spec_kind/);
      parseError(() => one(positional({ window: [] })), /kv_cache_spec_sliding_window/);
      parseError(() => one(positional({ locality: true })), /locality/);
      parseError(() => events([['BlockRemoved', [11], 'GPU', 'g']]), /group_idx/);
      parseError(() => events([['BlockRemoved', [11], 'GPU', 0, 5]]), /locality/);
    });

    it('a LoRA name or salt that is not valid UTF-8 → parse naming it', () => {
      const patch = (payload: Uint8Array, marker: string): Uint8Array => {
        const at = Buffer.from(payload).indexOf(marker);
        const out = Uint8Array.from(payload);
        out[at] = 0xff;
        out[at + 1] = 0xfe;
        return out;
      };
      const p1 = patch(enc([1.5, [mapStored({ lora_name: 'ZZZZ' })], 0]), 'ZZZZ');
      parseError(() => decodeBatchPayload(p1, 0n, p1.length, VLLM), /lora_name: invalid UTF-8/);
      const p2 = patch(enc([1.5, [mapStored({ extra_keys: [['ZZZZ'], null] })], 0]), 'ZZZZ');
      parseError(() => decodeBatchPayload(p2, 0n, p2.length, VLLM), /cache_salt: invalid UTF-8/);
    });

    it('snapshot blocks: lora_name, lora_id and extra_keys of the wrong type → parse', () => {
      const chunk = (extra: Record<string, unknown>): Uint8Array => enc({ dp_rank: 0, block_size: 4, blocks: [{ block_hash: 1, parent_block_hash: null, token_ids: [1, 2, 3, 4], media: ['gpu'], ...extra }] });
      const opts = { dpRank: 0, blockSize: 4, maxMessageBytes: 1 << 20 };
      parseError(() => decodeSnapshotChunk(chunk({ lora_name: 5 }), opts), /lora_name/);
      parseError(() => decodeSnapshotChunk(chunk({ lora_id: 'x' }), opts), /lora_id/);
      parseError(() => decodeSnapshotChunk(chunk({ extra_keys: 'x' }), opts), /extra_keys/);
    });
  });

  it('identities are shared instances: one per (LoRA, salt), reused across events and batches', () => {
    const a = one(mapStored({ lora_name: 'sql-lora' })).identity;
    const b = events([mapStored({ lora_name: 'sql-lora', extra_keys: [['sql-lora'], ['sql-lora']] }), mapStored({ lora_name: 'other' }), mapStored({ lora_name: 'sql-lora' })]);
    expect((b[0] as BlockStoredEvent).identity).to.equal(a);
    expect((b[2] as BlockStoredEvent).identity).to.equal(a);
    expect((b[1] as BlockStoredEvent).identity).to.not.equal(a);
    expect(one(mapStored()).identity).to.equal(PLAIN_IDENTITY);
    const s1 = one(mapStored({ extra_keys: [['t'], null] })).identity;
    expect(one(mapStored({ cache_salt: 't' })).identity).to.equal(s1);
  });
});
