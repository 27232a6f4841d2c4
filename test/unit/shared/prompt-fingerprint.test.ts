/**
 * Prompt fingerprints (shared/keys/prompt-fingerprint.ts): one chained 32-bit hash per complete
 * 16-token granule, so equal leading fingerprints mean an equal prefix.
 */
import { expect } from 'chai';
import { fingerprintBytes, fingerprintsOf, footprints, GRANULE_TOKENS, longerShared, MAX_PROMPT_GRANULES, promptFingerprints, sharedGranules, sharesGranules } from '../../../shared/keys/prompt-fingerprint.js';

const ids = (n: number, first = 1): number[] => Array.from({ length: n }, (_, i) => first + i);

describe('pending prefix fingerprints', () => {
  it('complete granules only, capped at maxGranules', () => {
    expect(promptFingerprints(ids(15))).to.have.length(0);
    expect(promptFingerprints(ids(47))).to.have.length(2);
    expect(promptFingerprints(ids(GRANULE_TOKENS * (MAX_PROMPT_GRANULES + 3)))).to.have.length(MAX_PROMPT_GRANULES);
    expect(promptFingerprints(ids(64), 2)).to.have.length(2);
  });

  it('prompts share k leading fingerprints exactly when their first 16·k tokens are equal; each one names the whole prefix before it', () => {
    const a = promptFingerprints(ids(64));
    const b = promptFingerprints([...ids(40), 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]);
    expect(sharedGranules(a, b)).to.equal(2);
    // The same third granule after a different first one: different fingerprints from there on.
    const c = promptFingerprints([...ids(16, 500), ...ids(48, 17)]);
    expect(sharedGranules(a, c)).to.equal(0);
    expect(c[1]).to.not.equal(a[1]);
    expect(sharedGranules(a, a.subarray(0, 3))).to.equal(3);
  });

  it('longerShared: one comparison decides whether a prompt beats the best so far; the result equals max(best, sharedGranules)', () => {
    const a = promptFingerprints(ids(160));
    const others = [promptFingerprints(ids(64)), promptFingerprints([...ids(100), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]), promptFingerprints(ids(32, 900))];
    let best = 0;
    for (const o of others) {
      const expected = Math.max(best, sharedGranules(a, o));
      best = longerShared(a, o, best);
      expect(best).to.equal(expected);
    }
    expect(best).to.equal(6);
    expect(longerShared(a, a, 10)).to.equal(10);
  });

  it('footprints: what the prompts ahead hold beyond a prompt, their union as a prefix tree', () => {
    // A context of 4 granules (64 tokens) with different tails; X another context.
    const ctx = ids(64);
    const mine = promptFingerprints([...ctx, ...ids(32, 1000)]);
    const sibling = promptFingerprints([...ctx, ...ids(48, 2000)]);
    const x1 = promptFingerprints([...ids(64, 5000), ...ids(16, 3000)]);
    const x2 = promptFingerprints([...ids(64, 5000), ...ids(32, 4000)]);
    const footprintGranules = (p: Uint32Array, ahead: Uint32Array[], count: number): number => footprints(p, ahead, count, null, { all: 0, included: 0 }).all;
    expect(footprintGranules(mine, [], 0)).to.equal(0);
    // A sibling touches only its own 3-granule tail beyond the shared context.
    expect(footprintGranules(mine, [sibling], 1)).to.equal(3);
    // Another context counts once: x1 whole (5), x2 only its tail beyond x1's context (2).
    expect(footprintGranules(mine, [x1, x2], 2)).to.equal(7);
    expect(footprintGranules(mine, [x2, x1], 2)).to.equal(7);
    // The count bounds the list (a reused scratch array).
    expect(footprintGranules(mine, [x1, x2, sibling], 1)).to.equal(5);
    // Both footprints in one pass: of all, and of the included entries alone (x2 alone holds 6: x1 is not in its union).
    expect(footprints(mine, [x1, x2, sibling], 3, Uint8Array.of(0, 1, 1), { all: 0, included: 0 })).to.deep.equal({ all: 10, included: 9 });
    expect(footprints(mine, [x1, x2], 2, null, { all: 0, included: 0 })).to.deep.equal({ all: 7, included: 7 });
    // A prefix of k granules is decided by the k-th fingerprint alone.
    expect([sharesGranules(sibling, mine, 4), sharesGranules(sibling, mine, 5), sharesGranules(x1, mine, 1), sharesGranules(sibling, mine, 0)]).to.deep.equal([true, false, false, false]);
  });

  it('wire form: little-endian uint32s; a length that is not a multiple of 4 or over the cap is refused', () => {
    const f = promptFingerprints(ids(80));
    const b = fingerprintBytes(f);
    expect(b.length).to.equal(20);
    expect(b.readUInt32LE(4)).to.equal(f[1]);
    expect(Array.from(fingerprintsOf(b)!)).to.deep.equal(Array.from(f));
    expect(fingerprintsOf(new Uint8Array(6))).to.equal(null);
    expect(fingerprintsOf(new Uint8Array(4 * MAX_PROMPT_GRANULES + 4))).to.equal(null);
  });
});
