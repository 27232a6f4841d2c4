// The shared group ResidencyIndex (shared/index/residency-index.ts) against a plain Map-based
// reference model written here: per stream, content key hex → tier bits, and the kv-events §8 walk
// read literally (each candidate stream on its own, from block 0, stop at the first key the stream
// does not hold, a key on both tiers counts as Device). Random stores, removals, clears, resets and
// stream removals/re-adds over many streams (slots across all four bitset words) and both tiers,
// checked after every step: same hits, same block counts, same per-key tiers, and lazy hashing —
// the match hashes exactly min(blocks, longest candidate prefix + 1) blocks.
//
// Keys come from a few documents that share prefixes, so holder sets are shared and change along
// a prompt. FC_RESIDENCY_RUNS lengthens the run, FC_SEED reproduces one.
import { expect } from 'chai';
import fc from 'fast-check';
import { ContentKeyHasher, contentKeyHex } from '../../shared/keys/content-key.js';
import { MAX_SLOTS } from '../../shared/index/holder-sets.js';
import { ResidencyIndex } from '../../shared/index/residency-index.js';
import { envInt } from '../helpers/env-int.js';

const RUNS = envInt('FC_RESIDENCY_RUNS', 150);
const FC_SEED = process.env['FC_SEED'];
const BS = 4;
const DOC_BLOCKS = 8;
const STREAMS = 40;

/** Document d's tokens: documents 0–3 share their first 3 blocks, 4–5 their first block. */
function docTokens(d: number): number[] {
  const out: number[] = [];
  for (let b = 0; b < DOC_BLOCKS; b++) {
    const owner = b < 3 && d < 4 ? 0 : b < 1 && d < 6 ? 4 : d;
    for (let t = 0; t < BS; t++) out.push(owner * 1000 + b * 10 + t);
  }
  return out;
}

type Step =
  | { kind: 'set'; stream: number; doc: number; from: number; to: number; tiers: number }
  | { kind: 'clear'; stream: number }
  | { kind: 'remove'; stream: number }
  | { kind: 'match'; doc: number; keep: number; candidates: number[] };

const streamArb = fc.integer({ min: 0, max: STREAMS - 1 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ kind: fc.constant('set' as const), stream: streamArb, doc: fc.integer({ min: 0, max: 7 }), from: fc.integer({ min: 0, max: DOC_BLOCKS - 1 }), to: fc.integer({ min: 1, max: DOC_BLOCKS }), tiers: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), stream: streamArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), stream: streamArb }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('match' as const), doc: fc.integer({ min: 0, max: 7 }), keep: fc.integer({ min: 0, max: DOC_BLOCKS * BS + 3 }), candidates: fc.uniqueArray(streamArb, { maxLength: STREAMS }) }) },
);

describe('shared residency index vs a Map-based reference model (kv-events §8, routing.md)', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });

  it('same hits, block counts and tiers under random stores, removals, clears and resets; lazy hashing', function () {
    this.timeout(120_000);
    const chains = Array.from({ length: 8 }, (_, d) => hasher.chain(docTokens(d), BS));
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 60 }), (steps) => {
        const index = new ResidencyIndex(BS, hasher);
        // Streams use slots spread over the bitset words: stream i gets a slot when first used.
        const slotOf = new Map<number, number>();
        const model = new Map<number, Map<string, number>>();
        const slot = (stream: number): number => {
          let s = slotOf.get(stream);
          if (s === undefined) {
            s = index.addStream();
            slotOf.set(stream, s);
            model.set(stream, new Map());
          }
          return s;
        };
        // Fill some slots with idle streams so the live ones reach the upper bitset words; idle +
        // STREAMS = MAX_SLOTS exactly, so every stream of the run gets a slot.
        for (let i = 0; i < MAX_SLOTS - STREAMS; i++) slot(1000 + i);
        for (const step of steps) {
          if (step.kind === 'set') {
            const keys = chains[step.doc]!;
            const from = Math.min(step.from, step.to - 1);
            const n = step.to - from;
            const tiers = new Uint8Array(n).fill(step.tiers);
            index.setTiers(slot(step.stream), keys.subarray(from * 16, step.to * 16), tiers);
            const m = model.get(step.stream)!;
            for (let b = from; b < step.to; b++) {
              const k = contentKeyHex(keys, b * 16);
              if (step.tiers === 0) m.delete(k);
              else m.set(k, step.tiers);
            }
          } else if (step.kind === 'clear') {
            index.clearStream(slot(step.stream));
            model.get(step.stream)!.clear();
          } else if (step.kind === 'remove') {
            const s = slotOf.get(step.stream);
            if (s === undefined) continue;
            index.removeStream(s);
            slotOf.delete(step.stream);
            model.delete(step.stream);
          } else {
            const tokens = docTokens(step.doc).slice(0, step.keep);
            while (tokens.length < step.keep) tokens.push(999_999);
            const blocks = Math.floor(tokens.length / BS);
            const chain = hasher.chain(tokens, BS);
            index.clearCandidates();
            for (const c of step.candidates) index.addCandidate(slot(c));
            // The chain form (windowed lookups) must answer exactly as the lazy one.
            index.matchChain(chain, blocks);
            const fromChain = step.candidates.map((c) => [index.deviceHitBlocks(slot(c)), index.hostOnlyHitBlocks(slot(c))]);
            index.match(tokens);
            let longest = -1;
            for (const [i, c] of step.candidates.entries()) {
              const m = model.get(c)!;
              let device = 0;
              let hostOnly = 0;
              for (let b = 0; b < blocks; b++) {
                const t = m.get(contentKeyHex(chain, b * 16)) ?? 0;
                if (t === 0) break;
                if (t & 1) device++;
                else hostOnly++;
              }
              longest = Math.max(longest, device + hostOnly);
              const s = slot(c);
              expect([index.deviceHitBlocks(s), index.hostOnlyHitBlocks(s)], `stream ${c}`).to.deep.equal([device, hostOnly]);
              expect(fromChain[i], `stream ${c}, chain form`).to.deep.equal([device, hostOnly]);
            }
            expect(index.lastHashedBlocks, 'blocks hashed').to.equal(longest < 0 ? 0 : Math.min(blocks, longest + 1));
            // keepMinimumOnly (CAR): per rank group (candidates grouped by c % 5), the first rank
            // with the minimum device + w·host_only keeps its exact counts and stays the minimum.
            const w = [0, 0.25, 1][step.doc % 3]!;
            const exact = new Map(step.candidates.map((c) => [c, [index.deviceHitBlocks(slot(c)), index.hostOnlyHitBlocks(slot(c))] as const]));
            const leaderOf = new Map<number, number>();
            index.clearCandidates();
            for (const c of step.candidates) {
              if (!leaderOf.has(c % 5)) leaderOf.set(c % 5, slot(c));
              index.addCandidate(slot(c), leaderOf.get(c % 5));
            }
            index.keepMinimumOnly(w);
            index.match(tokens);
            const firstMin = (hits: (c: number) => readonly [number, number], g: number): [number, number, number] => {
              let best: [number, number, number] = [Infinity, 0, 0];
              for (const c of step.candidates) {
                if (c % 5 !== g) continue;
                const [d, h] = hits(c);
                if (d + w * h < best[0]) best = [d + w * h, d, h];
              }
              return best;
            };
            for (const g of leaderOf.keys()) {
              expect(firstMin((c) => [index.deviceHitBlocks(slot(c)), index.hostOnlyHitBlocks(slot(c))], g), `rank group ${g}, w ${w}`).to.deep.equal(firstMin((c) => exact.get(c)!, g));
            }
            expect(index.lastHashedBlocks, 'blocks hashed, minimum only').to.be.at.most(longest < 0 ? 0 : Math.min(blocks, longest + 1));
          }
          for (const [stream, m] of model) {
            let device = 0;
            let host = 0;
            for (const t of m.values()) {
              if (t & 1) device++;
              if (t & 2) host++;
            }
            const s = slotOf.get(stream)!;
            if (index.deviceBlocks(s) !== device || index.hostBlocks(s) !== host) {
              expect([index.deviceBlocks(s), index.hostBlocks(s)], `counts of stream ${stream}`).to.deep.equal([device, host]);
            }
          }
          const distinct = new Set<string>();
          for (const m of model.values()) for (const k of m.keys()) distinct.add(k);
          expect(index.keyCount, 'distinct resident keys').to.equal(distinct.size);
        }
        for (const [stream, m] of model) {
          const s = slotOf.get(stream)!;
          for (const keys of chains) for (let b = 0; b < DOC_BLOCKS; b++) expect(index.tiersOf(s, keys, b * 16), `tiers of stream ${stream}`).to.equal(m.get(contentKeyHex(keys, b * 16)) ?? 0);
        }
      }),
      { numRuns: RUNS, ...(FC_SEED === undefined ? {} : { seed: Number(FC_SEED) }) },
    );
  });

  it('a prompt whose first block is nowhere hashes one block, whatever its length', () => {
    const index = new ResidencyIndex(BS, hasher);
    const s = index.addStream();
    index.setTiers(s, hasher.chain(docTokens(0), BS), new Uint8Array(DOC_BLOCKS).fill(1));
    index.clearCandidates();
    index.addCandidate(s);
    index.match(Array.from({ length: 8192 }, (_, i) => 500_000 + i));
    expect(index.lastHashedBlocks).to.equal(1);
    expect(index.deviceHitBlocks(s) + index.hostOnlyHitBlocks(s)).to.equal(0);
  });

  it('holder sets are recycled under churn: thousands of distinct sets come and go, answers stay exact', () => {
    const index = new ResidencyIndex(BS, hasher);
    const slots = Array.from({ length: MAX_SLOTS }, () => index.addStream());
    const keys = hasher.chain(Array.from({ length: 64 * BS }, (_, i) => i), BS);
    let x = 12345;
    const rnd = (n: number): number => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x % n;
    };
    const model = new Map<number, Map<number, number>>();
    for (let round = 0; round < 40; round++) {
      // Each key gets a random set of holders: nearly every set is new, old ones die.
      for (let k = 0; k < 64; k++) {
        for (let h = 0; h < 6; h++) {
          const s = slots[rnd(MAX_SLOTS)]!;
          const t = rnd(4);
          index.setTiers(s, keys.subarray(k * 16, k * 16 + 16), Uint8Array.of(t));
          let m = model.get(s);
          if (m === undefined) model.set(s, (m = new Map()));
          if (t === 0) m.delete(k);
          else m.set(k, t);
        }
      }
      if (round % 10 === 9) {
        const s = slots[rnd(MAX_SLOTS)]!;
        index.clearStream(s);
        model.get(s)?.clear();
      }
    }
    for (const s of slots) for (let k = 0; k < 64; k++) expect(index.tiersOf(s, keys, k * 16), `slot ${s} key ${k}`).to.equal(model.get(s)?.get(k) ?? 0);
    for (const s of slots) index.clearStream(s);
    expect([index.keyCount, index.holderSetCount]).to.deep.equal([0, 0]);
  });

  it(`refuses a stream slot beyond ${MAX_SLOTS} with a RangeError`, () => {
    const index = new ResidencyIndex(BS, hasher);
    for (let i = 0; i < MAX_SLOTS; i++) index.addStream();
    expect(() => index.addStream()).to.throw(RangeError, `at most ${MAX_SLOTS} streams`);
  });
});
