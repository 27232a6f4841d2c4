// Pure core of the MetaService data path: §4.3 key resolution, §4.4 masks, §4.5 URIs and ids,
// §5.3 query shapes and selection. No I/O; the HTTP suites cover the RPCs end to end.
import { expect } from 'chai';
import fc from 'fast-check';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { MetaError } from '../../../meta-svc/meta-errors.js';
import { BLOCK_KEY_HASH_SEED, resolveBlockKeys } from '../../../meta-svc/keys/block-key-resolver.js';
import { blockMaskToWire, checkBlockMask, isMasked } from '../../../meta-svc/keys/block-mask.js';
import { normalizeRootPath, percentEncodeSegment, specUri, uriPrefix } from '../../../meta-svc/keys/location-uri.js';
import { newLocationId, newWriteSessionId } from '../../../meta-svc/keys/random-ids.js';
import { effectiveQueryType, reverseRollWindowEnd } from '../../../meta-svc/lookup/query-lookup.js';
import { selectLocation } from '../../../meta-svc/lookup/location-selection.js';
import type { SelectionContext } from '../../../meta-svc/lookup/location-selection.js';
import type { DataPathInstance } from '../../../meta-svc/lookup/data-path-instance.js';
import { CLS_SERVING, CLS_WRITING } from '../../../meta-svc/store/meta-store.js';
import type { StoredLocation } from '../../../meta-svc/store/meta-store.js';

function metaCode(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof MetaError) return e.code;
    throw e;
  }
  return 'OK';
}

describe('kvcm-meta data path core (§4.3–§4.5, §5.3)', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(BLOCK_KEY_HASH_SEED);
  });
  const req = (blockKeys: bigint[], tokenIds: bigint[], blockSize = 8, maxKeys = 100000) =>
    ({ requestName: 'GetCacheLocation', blockKeys, tokenIds, blockSize, maxKeys }) as const;

  it('Q-01 §4.3 token ids 1..19, bs 8 give the published keys; trailing tokens ignored', () => {
    const tokens = Array.from({ length: 19 }, (_, i) => BigInt(i + 1));
    expect(resolveBlockKeys(req([], tokens), hasher)).to.deep.equal([-3034435009196788647n, 4952800032557538615n]);
    const bs4 = Array.from({ length: 8 }, (_, i) => BigInt(i + 1));
    expect(resolveBlockKeys(req([], bs4, 4), hasher)).to.deep.equal([3269227639227008688n, 7965172724627300500n]);
  });

  it('§4.3 block_keys win; both empty, non-int32 tokens and too many keys are INVALID_ARGUMENT', () => {
    expect(resolveBlockKeys(req([5n, 5n], [1n]), hasher)).to.deep.equal([5n, 5n]);
    expect(resolveBlockKeys(req([], [1n, 2n]), hasher)).to.deep.equal([]);
    expect(metaCode(() => resolveBlockKeys(req([], []), hasher))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => resolveBlockKeys(req([], [...Array(7).fill(0n), 2147483648n]), hasher))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => resolveBlockKeys(req([], [...Array(7).fill(0n), -2147483648n]), hasher))).to.equal('OK');
    expect(metaCode(() => resolveBlockKeys(req([1n, 2n, 3n], [], 8, 2), hasher))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => resolveBlockKeys(req([], Array(24).fill(1n), 8, 2), hasher))).to.equal('INVALID_ARGUMENT');
  });

  it('§4.4 mask validity and membership; §6 step 3 wire form', () => {
    expect(isMasked({ kind: 'offset', offset: 2 }, 1)).to.equal(true);
    expect(isMasked({ kind: 'offset', offset: 2 }, 2)).to.equal(false);
    expect(isMasked({ kind: 'bools', values: [false, true] }, 1)).to.equal(true);
    expect(isMasked({ kind: 'none' }, 0)).to.equal(false);
    expect(metaCode(() => checkBlockMask({ kind: 'offset', offset: 3 }, 2, 'm'))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => checkBlockMask({ kind: 'offset', offset: -1 }, 2, 'm'))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => checkBlockMask({ kind: 'bools', values: [true] }, 2, 'm'))).to.equal('INVALID_ARGUMENT');
    expect(metaCode(() => checkBlockMask({ kind: 'bools', values: [true] }, 2, 'm', true))).to.equal('OK');
    expect(metaCode(() => checkBlockMask({ kind: 'bools', values: [true, true, true] }, 2, 'm', true))).to.equal('INVALID_ARGUMENT');
    expect(blockMaskToWire([])).to.deep.equal({ offset: 0 });
    expect(blockMaskToWire([true, true])).to.deep.equal({ offset: 2 });
    expect(blockMaskToWire([false, false])).to.deep.equal({ offset: 0 });
    expect(blockMaskToWire([false, false, true])).to.deep.equal({ bool_masks: { values: [false, false, true] } });
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 20 }), (bits) => {
        const w = blockMaskToWire(bits);
        const mask = 'offset' in w ? ({ kind: 'offset', offset: w.offset } as const) : ({ kind: 'bools', values: w.bool_masks.values } as const);
        return bits.every((b, i) => isMasked(mask, i) === b);
      }),
    );
  });

  it('§4.5 root_path normalization, percent-encoding and the published URI example', () => {
    expect(normalizeRootPath('./data/kvcm')).to.equal('data/kvcm');
    expect(normalizeRootPath('//data//kvcm///')).to.equal('data/kvcm');
    expect(normalizeRootPath('./')).to.equal('');
    expect(normalizeRootPath('')).to.equal('');
    expect(percentEncodeSegment('full_attention:group=0:tp=0')).to.equal('full_attention:group=0:tp=0');
    expect(percentEncodeSegment('a b/é~@')).to.equal('a%20b%2F%C3%A9~@');
    const prefix = uriPrefix({ scheme: 'file', name: 'local_file', root: 'data/kvcm' }, 'test_instance');
    expect(specUri(prefix, 123n, 'tp0', 4096000n)).to.equal('file://local_file/data/kvcm/test_instance/123_tp0?offset=0&size=4096000');
    const noRoot = uriPrefix({ scheme: 'dummy', name: 'd', root: '' }, 'i d');
    expect(specUri(noRoot, -5n, 's', 1n)).to.equal('dummy://d/i%20d/-5_s?offset=0&size=1');
  });

  it('§4.5/§6 ids: 8 and 32 characters of [A-Za-z0-9]', () => {
    for (let i = 0; i < 50; i++) {
      expect(newLocationId()).to.match(/^[A-Za-z0-9]{8}$/);
      expect(newWriteSessionId()).to.match(/^[A-Za-z0-9]{32}$/);
    }
  });

  it('Q-04 §5.3 reverse-roll window end: largest e whose [e−sw, e) all hit', () => {
    const h = (s: string): boolean[] => [...s].map((c) => c === '1');
    expect(reverseRollWindowEnd(h('11011'), 2)).to.equal(5);
    expect(reverseRollWindowEnd(h('11011'), 3)).to.equal(0);
    expect(reverseRollWindowEnd(h('11100'), 3)).to.equal(3);
    expect(reverseRollWindowEnd(h('11011'), 0)).to.equal(0);
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 16 }), fc.nat(16), (hits, sw0) => {
        const sw = Math.min(sw0, hits.length);
        let want = 0;
        if (sw > 0) for (let e = sw; e <= hits.length; e++) if (hits.slice(e - sw, e).every(Boolean)) want = e;
        return reverseRollWindowEnd(hits, sw) === want;
      }),
    );
  });

  it('Q-05 §5.3 query type defaults; MAMBA is UNSUPPORTED', () => {
    expect(effectiveQueryType(0, 1)).to.equal(1);
    expect(effectiveQueryType(0, 0)).to.equal(2);
    expect(effectiveQueryType(3, 1)).to.equal(3);
    expect(metaCode(() => effectiveQueryType(4, 2))).to.equal('UNSUPPORTED');
    expect(metaCode(() => effectiveQueryType(0, 4))).to.equal('UNSUPPORTED');
  });

  it('§5.3 selection: serving only, configured storage, rank, newest create_time, smallest id, spec filter', () => {
    const instance: DataPathInstance = {
      record: {
        instanceId: 'i',
        instanceGroup: 'g',
        blockSize: 8,
        locationSpecInfos: [{ name: 'tp0', size: 1n }],
        locationSpecGroups: [],
        modelDeployment: null,
        defaultQueryType: 0,
      },
      groupName: 'g',
      writableCandidates: [
        { name: 'a', storageType: 4, available: true, uri: { scheme: 'file', name: 'a', root: '' } },
        { name: 'b', storageType: 6, available: true, uri: { scheme: 'dummy', name: 'b', root: '' } },
      ],
      quotaBytes: 0n,
      isConfiguredStorage: (n) => n !== 'gone',
    };
    const ctx = (specFilter: ReadonlySet<string> | null = null): SelectionContext => ({
      instance,
      visibility: { isVisible: (_i, l) => l.locationId.endsWith('ok') },
      nowMs: 0,
      specFilter,
    });
    const loc = (id: string, storageName: string, createTimeUs: bigint, over: Partial<StoredLocation> = {}): StoredLocation => ({
      locationId: id,
      storageName,
      type: storageName === 'a' ? 4 : storageName === 'b' ? 6 : 4,
      status: CLS_SERVING,
      createTimeUs,
      rev: 1,
      specs: [{ name: 'tp0', uri: 'file://x' }],
      ...over,
    });
    const pick = (locations: StoredLocation[], f: ReadonlySet<string> | null = null): string | undefined =>
      selectLocation({ properties: {}, locations }, ctx(f))?.location.locationId;
    expect(pick([loc('B1', 'b', 9n), loc('A1', 'a', 1n)])).to.equal('A1');
    expect(pick([loc('A1', 'a', 1n), loc('A2', 'a', 2n)])).to.equal('A2');
    expect(pick([loc('A2', 'a', 2n), loc('A1', 'a', 2n)])).to.equal('A1');
    expect(pick([loc('A1', 'a', 5n, { status: CLS_WRITING }), loc('B1', 'b', 1n)])).to.equal('B1');
    expect(pick([loc('G1', 'gone', 5n)])).to.equal(undefined);
    expect(pick([loc('A1', 'a', 1n)], new Set(['zz']))).to.equal(undefined);
    const er = (id: string): StoredLocation => loc(id, 'event_report_l2', 99n, { type: 8 });
    expect(pick([er('kvs#event_report_l2#gpu#h:ok')])).to.equal('kvs#event_report_l2#gpu#h:ok');
    expect(pick([er('kvs#event_report_l2#gpu#h:hidden')])).to.equal(undefined);
    expect(pick([er('kvs#event_report_l2#gpu#h:ok'), loc('B1', 'b', 1n)])).to.equal('B1');

    // the entry merges the winner's source (one reporter, all media), winner first, first
    // spec of each name kept; other reporters and the other event-report type never join.
    const rep = (id: string, type: number, createTimeUs: bigint, names: string[]): StoredLocation =>
      loc(id, type === 8 ? 'event_report_l2' : 'event_report_l1p5', createTimeUs, { type, specs: names.map((n) => ({ name: n, uri: `x://${id}/${n}` })) });
    const entry = (locations: StoredLocation[], f: ReadonlySet<string> | null = null) => {
      const sel = selectLocation({ properties: {}, locations }, ctx(f));
      return sel && { id: sel.location.locationId, specs: sel.specs.map((sp) => sp.uri) };
    };
    const mem = rep('kvs#event_report_l2#mem#h1:ok', 8, 2n, ['mem_spec', 'shared']);
    const disk = rep('kvs#event_report_l2#disk#h1:ok', 8, 1n, ['disk_spec', 'shared']);
    const peer = rep('kvs#event_report_l2#mem#h2:ok', 8, 3n, ['peer_spec']);
    const l1p5 = rep('kvs#event_report_l1p5#mem#h1:ok', 7, 9n, ['l1_spec']);
    expect(entry([disk, mem])).to.deep.equal({
      id: mem.locationId,
      specs: [`x://${mem.locationId}/mem_spec`, `x://${mem.locationId}/shared`, `x://${disk.locationId}/disk_spec`],
    });
    expect(entry([mem, peer]), 'another reporter').to.deep.equal({ id: peer.locationId, specs: [`x://${peer.locationId}/peer_spec`] });
    expect(entry([mem, l1p5]), 'the other type of the same host').to.deep.equal({ id: l1p5.locationId, specs: [`x://${l1p5.locationId}/l1_spec`] });
    expect(entry([disk, mem], new Set(['disk_spec']))).to.deep.equal({ id: disk.locationId, specs: [`x://${disk.locationId}/disk_spec`] });
    expect(entry([loc('A1', 'a', 1n), loc('A2', 'a', 2n, { specs: [{ name: 'tp1', uri: 'file://y' }] })])).to.deep.equal({ id: 'A2', specs: ['file://y', 'file://x'] });
  });
});
