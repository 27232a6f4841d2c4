// The group's key table (shared/index/key-holder-table.ts) against a Map model: random inserts
// (after a random record, as a chain's next key is), deletes, pins and unpins over a pool of keys,
// checked after every step. A key keeps its id while it is in the table (pinned or resident);
// every lookup, with any hint, finds exactly the keys in the table, so neither a free record's
// old key words nor a re-used record ever answer for another key; the table's size and id range
// follow. FC_SEED reproduces a run, FC_KEY_TABLE_RUNS lengthens it.
import { expect } from 'chai';
import fc from 'fast-check';
import { KeyHolderTable } from '../../shared/index/key-holder-table.js';
import { envInt } from '../helpers/env-int.js';

const RUNS = envInt('FC_KEY_TABLE_RUNS', 40);
const FC_SEED = process.env['FC_SEED'];
/** Distinct keys in play: enough for the records and hash index to grow and shrink. */
const POOL = 400;

type Step =
  | { kind: 'insert'; key: number; after: number; run: number }
  | { kind: 'delete'; key: number; run: number }
  | { kind: 'pin'; key: number }
  | { kind: 'unpin'; key: number };

/** The 4 words of pool key k; word 0 is its probe start, and keys 2j, 2j+1 collide on it. */
function keyWords(k: number): Uint32Array {
  const w = new Uint32Array(4);
  let x = (Math.imul(k >>> 1, 0x9e3779b1) ^ 0x5bd1e995) >>> 0;
  w[0] = x;
  for (let i = 1; i < 4; i++) {
    x = Math.imul(x ^ (x >>> 15) ^ k, 0x85ebca6b) >>> 0;
    w[i] = x;
  }
  return w;
}

const keyArb = fc.integer({ min: 0, max: POOL - 1 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('insert' as const), key: keyArb, after: fc.integer({ min: -1, max: POOL }), run: fc.integer({ min: 1, max: 40 }) }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb, run: fc.integer({ min: 1, max: 60 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('pin' as const), key: keyArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('unpin' as const), key: keyArb }) },
);

interface Model {
  /** Pool key → its id, while in the table. */
  ids: Map<number, number>;
  pins: Map<number, number>;
  /** Pool key → holder set (0: pinned only). */
  sets: Map<number, number>;
}

function apply(t: KeyHolderTable, m: Model, s: Step, words: Uint32Array[]): void {
  if (s.kind === 'insert') {
    // A run of consecutive pool keys, each after the previous one's record, as a chain is stored.
    let prev = s.after < POOL ? (m.ids.get(s.after) ?? -1) : POOL * 4;
    for (let k = s.key; k < Math.min(POOL, s.key + s.run); k++) {
      const found = t.findAfter(words[k]!, 0, prev);
      if (found >= 0) {
        prev = found;
        continue;
      }
      const w = words[k]!;
      const set = 1 + (k % 7);
      prev = t.insert(w[0]!, w[1]!, w[2]!, w[3]!, set, prev >= POOL * 4 ? -1 : prev);
      m.ids.set(k, prev);
      m.sets.set(k, set);
    }
  } else if (s.kind === 'delete') {
    for (let k = s.key; k < Math.min(POOL, s.key + s.run); k++) {
      const id = m.ids.get(k);
      if (id === undefined || (m.pins.get(k) ?? 0) > 0) continue;
      t.deleteAt(id);
      m.ids.delete(k);
      m.sets.delete(k);
    }
  } else if (s.kind === 'pin') {
    const id = t.pin(words[s.key]!, 0);
    if (!m.ids.has(s.key)) {
      m.ids.set(s.key, id);
      m.sets.set(s.key, 0);
    }
    m.pins.set(s.key, (m.pins.get(s.key) ?? 0) + 1);
  } else {
    const pins = m.pins.get(s.key) ?? 0;
    if (pins === 0) return;
    const deleted = t.unpin(m.ids.get(s.key)!);
    m.pins.set(s.key, pins - 1);
    expect(deleted, `unpin of key ${s.key}`).to.equal(pins === 1 && m.sets.get(s.key) === 0);
    if (deleted) {
      m.ids.delete(s.key);
      m.sets.delete(s.key);
    }
  }
}

function check(t: KeyHolderTable, m: Model, words: Uint32Array[], hints: number[]): void {
  expect(t.size).to.equal(m.ids.size);
  for (let k = 0; k < POOL; k++) {
    const want = m.ids.get(k) ?? -1;
    for (const prev of hints) expect(t.findAfter(words[k]!, 0, prev), `key ${k} after ${prev}`).to.equal(want);
    if (want < 0) continue;
    expect(want).to.be.below(t.idBound);
    expect(t.setAt(want), `set of key ${k}`).to.equal(m.sets.get(k));
    expect(t.pinnedAt(want)).to.equal((m.pins.get(k) ?? 0) > 0);
    expect(t.keyEquals(want, words[k]!, 0)).to.equal(true);
  }
}

describe('KeyHolderTable vs a Map model (stable ids, hinted lookups, record re-use)', () => {
  it('same keys and ids after every step of random inserts, deletes, pins and unpins', () => {
    const words = Array.from({ length: POOL }, (_, k) => keyWords(k));
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 60 }), (steps) => {
        const t = new KeyHolderTable();
        const m: Model = { ids: new Map(), pins: new Map(), sets: new Map() };
        for (const s of steps) {
          apply(t, m, s, words);
          // Hints: none, every record in the table's range, and one past it.
          const hints = [-1, t.idBound];
          for (const id of m.ids.values()) hints.push(id, id - 1);
          const every = Math.ceil(hints.length / 12);
          check(t, m, words, hints.filter((_, i) => i % every === 0));
        }
        // Deleting everything leaves an empty table with no id range.
        for (const [k, n] of m.pins) for (let i = 0; i < n; i++) t.unpin(m.ids.get(k)!);
        for (const [k, id] of m.ids) if (m.sets.get(k) !== 0) t.deleteAt(id);
        expect([t.size, t.idBound]).to.deep.equal([0, 0]);
      }),
      { numRuns: RUNS, ...(FC_SEED !== undefined ? { seed: Number(FC_SEED) } : {}) },
    );
  });
});
