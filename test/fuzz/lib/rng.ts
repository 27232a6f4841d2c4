// The generator of a small seeded mutation fuzzer for the project's parsers (no @jazzer.js: plain TypeScript, so a
// failure reproduces from `FUZZ_SEED` and an iteration number alone).
//
//   corpus seed ──pick──▶ mutate (1..4 stacked mutations) ──▶ target(input) ──▶ allowed error or ok
//        ▲                   byte level: flip, set, insert, delete, truncate, duplicate, splice
//        │                   msgpack:   container length, integer width, str/bin length, type byte
//        └── test/fuzz/corpus/<kind>/   JSON:      token delete/duplicate/swap/replace, splice, nesting
//
// Every iteration draws from its own generator, `Rng.forIteration(seed, i)`, so input i can be
// rebuilt without replaying inputs 0..i−1: a guard that kills a hung worker names the seed and the
// iteration, and `inputFor` regenerates the exact bytes for the report.
//
// (fast-check drives the property suites; this fuzzer stays its own because a guard must kill a
// worker stuck in a synchronous parser and rebuild that one input from the seed alone.)

/** sfc32: small, fast, good enough for mutation choices; state seeded through splitmix32. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** The generator of iteration `i` of a run seeded with `seed` (independent of other iterations). */
  static forIteration(seed: number, i: number): Rng {
    return new Rng((Math.imul(seed >>> 0, 0x27d4eb2d) ^ Math.imul(i + 1, 0x165667b1)) >>> 0);
  }

  u32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform integer in [0, n); 0 when n ≤ 0. */
  int(n: number): number {
    return n <= 0 ? 0 : Math.floor((this.u32() / 0x1_0000_0000) * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.u32() / 0x1_0000_0000 < p;
  }

  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new RangeError('pick from an empty list');
    return xs[this.int(xs.length)]!;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}
