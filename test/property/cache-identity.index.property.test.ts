// cache-identity §3–§4 as a property of the directory's ingest and query path: random mixes of
// identities (plain, two LoRA names, two salts, LoRA + salt) stored, re-stored, replicated and
// removed on several streams, as vLLM publishes them (map events with lora_name and per-block
// extra_keys, decoded by the directory's decoder), plus a sliding-window group beside group 0.
// After every batch, for every stream, identity and prompt, the directory's Query answer
// (StreamQuery over the shared residency group) must equal
//   - a truth model that never looks at content keys: per stream, the tiers of each block stored
//     under each identity (engine hashes stand 1:1 for (identity, token prefix), as an engine
//     hashes them), walked from block 0 under the QUERY's identity only — so no identity ever
//     credits another, and nothing crosses streams;
//   - the reference model of test/unit/index/ (reference-index.ts) matched with the query's keys.
// FC_IDENTITY_RUNS lengthens the run, FC_SEED reproduces one.
import { expect } from 'chai';
import fc from 'fast-check';
import { encode } from '@msgpack/msgpack';
import { ContentKeyHasher, contentKeyHex } from '../../shared/keys/content-key.js';
import { keyIdentity, PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { decodeBatchPayload } from '../../directory-svc/decoder/live-frame-decoder.js';
import { ServedResidency } from '../../directory-svc/index/served-residency.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import { StreamQuery, type QueryableStream } from '../../directory-svc/index/stream-query.js';
import { ReferenceIndex } from '../unit/index/reference-index.js';
import { noSkips } from '../unit/index/index-fixtures.js';
import { envInt } from '../helpers/env-int.js';

const RUNS = envInt('FC_IDENTITY_RUNS', 120);
const FC_SEED = process.env['FC_SEED'];
const BS = 2;
const STREAMS = 3;

/** The identities in play (cache-identity §2: a request names at most one LoRA and one salt). */
const IDENTITIES: readonly { lora: string | null; salt: string | null }[] = [
  { lora: null, salt: null },
  { lora: 'sql-lora', salt: null },
  { lora: 'chat-lora', salt: null },
  { lora: null, salt: 'tenant-a' },
  { lora: null, salt: 'tenant-b' },
  { lora: 'sql-lora', salt: 'tenant-a' },
];
const KEY_IDS: readonly KeyIdentity[] = IDENTITIES.map((i) => keyIdentity(i.lora, i.salt));

/** Prompts as block ids over a three-block alphabet: shared prefixes, equal tokens across identities. */
const BLOCK_TOKENS = [
  [1, 2],
  [2, 1],
  [1, 1],
];
const PATHS: readonly (readonly number[])[] = [
  [0, 1, 2, 0],
  [0, 1, 1],
  [2, 0],
  [0, 2, 2, 1],
];
const tokensOf = (blocks: readonly number[]): number[] => blocks.flatMap((b) => BLOCK_TOKENS[b]!);

/** Engine hash of (identity, token prefix): an engine's hash covers both (kv-events §11.4). */
const engineHashes = new Map<string, number>();
function engineHash(identity: number, path: number, blocks: number): number {
  const k = `${identity}|${tokensOf(PATHS[path]!.slice(0, blocks)).join(',')}`;
  let h = engineHashes.get(k);
  if (h === undefined) {
    h = 1000 + engineHashes.size;
    engineHashes.set(k, h);
  }
  return h;
}

type Intent =
  | { kind: 'store'; stream: number; identity: number; path: number; start: number; count: number; cpu: boolean; slidingTwin: boolean }
  | { kind: 'remove'; stream: number; identity: number; path: number; at: number; cpu: boolean; group: 0 | 1 }
  | { kind: 'replica'; stream: number; identity: number; path: number; at: number }
  | { kind: 'clear'; stream: number };

const streamArb = fc.nat({ max: STREAMS - 1 });
const identityArb = fc.nat({ max: IDENTITIES.length - 1 });
const pathArb = fc.nat({ max: PATHS.length - 1 });
const intentArb: fc.Arbitrary<Intent> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('store' as const), stream: streamArb, identity: identityArb, path: pathArb, start: fc.nat({ max: 3 }), count: fc.integer({ min: 1, max: 4 }), cpu: fc.boolean(), slidingTwin: fc.nat({ max: 3 }).map((x) => x === 0) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('remove' as const), stream: streamArb, identity: identityArb, path: pathArb, at: fc.nat({ max: 3 }), cpu: fc.boolean(), group: fc.constantFrom<0 | 1>(0, 0, 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('replica' as const), stream: streamArb, identity: identityArb, path: pathArb, at: fc.nat({ max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), stream: streamArb }) },
);

/** A vLLM 0.19+ BlockStored for blocks [start, start+count) of a path under an identity. */
function vllmStored(identity: number, path: number, start: number, count: number, medium: string, group: 0 | 1): Record<string, unknown> {
  const id = IDENTITIES[identity]!;
  const blocks = PATHS[path]!;
  const hashes: number[] = [];
  const extra: (string[] | null)[] = [];
  for (let j = start; j < start + count; j++) {
    hashes.push(engineHash(identity, path, j + 1));
    // vLLM's per-block extra keys: the LoRA name on every block, the salt on the chain's first.
    const parts: string[] = [];
    if (id.lora !== null) parts.push(id.lora);
    if (id.salt !== null && j === 0) parts.push(id.salt);
    extra.push(parts.length === 0 ? null : parts);
  }
  return {
    type: 'BlockStored',
    block_hashes: hashes,
    parent_block_hash: start === 0 ? null : engineHash(identity, path, start),
    token_ids: tokensOf(blocks.slice(start, start + count)),
    block_size: BS,
    lora_id: id.lora === null ? null : 1 + identity,
    medium,
    lora_name: id.lora,
    extra_keys: extra.every((e) => e === null) ? null : extra,
    group_idx: group,
    kv_cache_spec_kind: group === 0 ? 'full_attention' : 'sliding_window',
  };
}

/** Per stream: engine hash → tiers, for hashes stored in group 0 (what the engine holds). */
type Truth = Map<number, number>;

describe('cache-identity property: identities never cross, every query gets the reference hits', function () {
  this.timeout(180_000);
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024n);
  });

  it('CI1/CI2/CI4/CI9 random identity mixes on several streams: the Query answer equals the truth and the reference model for every identity', () => {
    let queries = 0;
    let credited = 0;
    fc.assert(
      fc.property(fc.array(fc.array(intentArb, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 25 }), (batches) => {
        const groups = new ResidencyGroups();
        const truth: Truth[] = [];
        const refs: ReferenceIndex[] = [];
        const indexes: StreamIndex[] = [];
        const streams: QueryableStream[] = [];
        for (let s = 0; s < STREAMS; s++) {
          const served = new ServedResidency(groups, BS, hasher);
          const index: StreamIndex = new StreamIndex({
            blockSize: BS,
            hasher,
            maxEntries: 100_000,
            keySpace: served.group,
            onResidencyChange: (w, o, _before, after) => served.change(index, w, o, after),
          });
          served.serve(index);
          indexes.push(index);
          refs.push(new ReferenceIndex(BS, hasher, 100_000));
          truth.push(new Map());
          streams.push({ instanceName: `engine-${s}`, dpRank: 0, blockSize: BS, hashSeed: 1024n, synchronized: true, sequence: 0n, error: '', index, residency: served });
        }
        const query = new StreamQuery();

        for (const intents of batches) {
          // Each stream's events of this batch, chosen against its current truth (a publisher
          // only chains on a resident parent and only replicates resident blocks, §11.5–6).
          const perStream: unknown[][] = Array.from({ length: STREAMS }, () => []);
          for (const it of intents) {
            const t = truth[it.stream]!;
            const events = perStream[it.stream]!;
            if (it.kind === 'clear') {
              events.push({ type: 'AllBlocksCleared' });
              t.clear();
              continue;
            }
            const len = PATHS[it.path]!.length;
            if (it.kind === 'store') {
              let resident = 0;
              while (resident < len && (t.get(engineHash(it.identity, it.path, resident + 1)) ?? 0) !== 0) resident++;
              const start = Math.min(it.start, resident, len - 1);
              const count = Math.min(it.count, len - start);
              const medium = it.cpu ? 'CPU' : 'GPU';
              events.push(vllmStored(it.identity, it.path, start, count, medium, 0));
              for (let j = start; j < start + count; j++) {
                const h = engineHash(it.identity, it.path, j + 1);
                t.set(h, (t.get(h) ?? 0) | (it.cpu ? 2 : 1));
              }
              // A hybrid model's sliding-window group publishes the same hashes: never indexed.
              if (it.slidingTwin) events.push(vllmStored(it.identity, it.path, start, count, medium, 1));
            } else if (it.kind === 'remove') {
              const h = engineHash(it.identity, it.path, Math.min(it.at, len - 1) + 1);
              events.push({ type: 'BlockRemoved', block_hashes: [h], medium: it.cpu ? 'CPU' : 'GPU', group_idx: it.group });
              if (it.group === 0 && t.has(h)) {
                const left = t.get(h)! & ~(it.cpu ? 2 : 1);
                if (left === 0) t.delete(h);
                else t.set(h, left);
              }
            } else {
              const h = engineHash(it.identity, it.path, Math.min(it.at, len - 1) + 1);
              if ((t.get(h) ?? 0) === 0) continue;
              events.push({ type: 'BlockStored', block_hashes: [h], parent_block_hash: null, token_ids: [], block_size: BS, lora_id: null, medium: 'CPU', lora_name: null });
              t.set(h, t.get(h)! | 2);
            }
          }
          for (let s = 0; s < STREAMS; s++) {
            if (perStream[s]!.length === 0) continue;
            const payload = encode([1700000000.5, perStream[s]], { useBigInt64: true });
            const decoded = decodeBatchPayload(payload, 0n, payload.length, { dpRank: 0, historyKindRules: true }).events;
            const skipped = noSkips();
            // A publisher following §11 never makes the index fail.
            indexes[s]!.applyEvents(decoded, skipped);
            for (const e of decoded) refs[s]!.apply(e, noSkips());
          }

          for (let q = 0; q < IDENTITIES.length; q++) {
            for (let p = 0; p < PATHS.length; p++) {
              const tokens = tokensOf(PATHS[p]!);
              const answer = query.query(tokens, streams, KEY_IDS[q]!);
              const keys = hasher.chain(tokens, BS, undefined, KEY_IDS[q]!);
              const keyHex = Array.from({ length: keys.length / 16 }, (_, i) => contentKeyHex(keys, i * 16));
              for (let s = 0; s < STREAMS; s++) {
                const m = answer.matches.find((x) => x.instance_name === `engine-${s}`)!;
                // Truth: walk the query's own identity's blocks in this stream only.
                let device = 0;
                let hostOnly = 0;
                for (let b = 0; b < PATHS[p]!.length; b++) {
                  const tiers = truth[s]!.get(engineHash(q, p, b + 1)) ?? 0;
                  if (tiers === 0) break;
                  if (tiers & 1) device++;
                  else hostOnly++;
                }
                const where = `stream ${s}, identity ${JSON.stringify(IDENTITIES[q])}, path ${p}`;
                expect([m.device_hit_tokens, m.host_only_hit_tokens], where).to.deep.equal([device * BS, hostOnly * BS]);
                const [refDevice, refHost] = refs[s]!.match(keyHex);
                expect([m.device_hit_tokens, m.host_only_hit_tokens], `${where} (reference)`).to.deep.equal([refDevice * BS, refHost * BS]);
                queries++;
                if (device + hostOnly > 0) credited++;
              }
            }
          }
        }
      }),
      { numRuns: RUNS, ...(FC_SEED === undefined ? {} : { seed: Number(FC_SEED) }) },
    );
    // The property must exercise credit, not only its absence.
    expect(credited, `credited queries of ${queries}`).to.be.greaterThan(queries / 20);
  });

  it('CI9 the same tokens under two identities on two streams: each stream is credited for its own identity only', () => {
    const groups = new ResidencyGroups();
    const streams: QueryableStream[] = [0, 1].map((s) => {
      const served = new ServedResidency(groups, BS, hasher);
      const index: StreamIndex = new StreamIndex({ blockSize: BS, hasher, maxEntries: 100, keySpace: served.group, onResidencyChange: (w, o, _b, a) => served.change(index, w, o, a) });
      served.serve(index);
      const payload = encode([1.5, [vllmStored(s === 0 ? 1 : 3, 0, 0, 4, 'GPU', 0)]], { useBigInt64: true });
      index.applyEvents(decodeBatchPayload(payload, 0n, payload.length, { dpRank: 0, historyKindRules: true }).events, noSkips());
      return { instanceName: `engine-${s}`, dpRank: 0, blockSize: BS, hashSeed: 1024n, synchronized: true, sequence: 0n, error: '', index, residency: served };
    });
    const tokens = tokensOf(PATHS[0]!);
    const hits = (id: KeyIdentity): number[] => new StreamQuery().query(tokens, streams, id).matches.map((m) => m.device_hit_tokens);
    expect(hits(KEY_IDS[1]!)).to.deep.equal([8, 0]);
    expect(hits(KEY_IDS[3]!)).to.deep.equal([0, 8]);
    expect(hits(PLAIN_IDENTITY)).to.deep.equal([0, 0]);
    expect(hits(KEY_IDS[5]!)).to.deep.equal([0, 0]);
  });
});
