// architecture.md "The view stream": a stream reset carries the stream's whole residency. The
// publisher builds it from the residency exported at the swap plus the changes the served index
// reported before the delta was cut; the result must be what applying those changes in order
// (last write wins, tier 0 = gone) to the export gives.
import { expect } from 'chai';
import fc from 'fast-check';
import { ResidencyBuffer, mergeResidency } from '../../../directory-svc/view/residency-buffer.js';
import { residencyMap } from '../../helpers/view-model.js';

/** A 16-byte content key from a small id, so changes collide with the base and each other. */
function keyWords(id: number): Uint32Array {
  return Uint32Array.of(id, id * 7 + 1, 0, id >>> 3);
}

function exported(entries: ReadonlyMap<number, number>): { keys: Uint8Array; tiers: Uint8Array } {
  const words = new Uint32Array(entries.size * 4);
  const tiers = new Uint8Array(entries.size);
  let i = 0;
  for (const [id, t] of entries) {
    words.set(keyWords(id), i * 4);
    tiers[i++] = t;
  }
  return { keys: new Uint8Array(words.buffer), tiers };
}

describe('architecture.md view stream: a reset merges the changes after its export', () => {
  it('equals the export with every later change applied in order', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.integer({ min: 0, max: 40 }).map(String), fc.integer({ min: 1, max: 3 })),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 3 })), { maxLength: 80 }),
        (baseDict, changes) => {
          const base = new Map<number, number>(Object.entries(baseDict).map(([k, t]) => [Number(k), t]));
          const buffer = new ResidencyBuffer(4);
          const want = new Map(base);
          for (const [id, t] of changes) {
            buffer.push(keyWords(id), 0, t);
            if (t === 0) want.delete(id);
            else want.set(id, t);
          }
          const got = mergeResidency(exported(base), buffer);
          expect(got.tiers.length).to.equal(want.size);
          expect(residencyMap(got)).to.deep.equal(residencyMap(exported(want)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
