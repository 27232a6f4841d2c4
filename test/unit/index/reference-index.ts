// A deliberately naive reference model of kv-events §5 (Map<bigint, record>, string keys), written
// straight from the spec's rule text, for the property tests that StreamIndex agrees with it.
// cache-identity §4 read as literally: keys carry the block's identity suffix (root suffix on a
// parentless block, chain suffix otherwise); blocks from `reproducibleBlocks` on are out of scope
// (`multimodal`); one KV cache group is applied, the lowest reusable one (a lower one appearing
// later is `inconsistent`, the directory's documented choice); skips count a block only when its
// record is created (rule 6: re-emitted stores count nothing), `group` counts every hash ignored.
import type { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { contentKeyHex } from '../../../shared/keys/content-key.js';
import type { StreamErrorClass } from '../../../directory-svc/errors/stream-errors.js';
import type { KvEvent } from '../../../directory-svc/decoder/kv-batch.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';

export class ReferenceError extends Error {
  constructor(readonly cls: StreamErrorClass) {
    super(cls);
  }
}

interface ReferenceRecord {
  key: string | null; // null = UNINDEXED
  tiers: number;
}

const UNI = Symbol('UNINDEXED');
type Parent = string | null | typeof UNI; // key hex, root, or UNINDEXED

const popcount = (t: number): number => (t & 1) + ((t >> 1) & 1);

export class ReferenceIndex {
  readonly records = new Map<bigint, ReferenceRecord>();
  /** Every key ever computed, so absent keys can be checked too. */
  readonly seenKeys = new Set<string>();

  constructor(
    private readonly blockSize: number,
    private readonly hasher: ContentKeyHasher,
    private readonly maxEntries: number,
  ) {}

  entries(): number {
    let n = 0;
    for (const r of this.records.values()) n += popcount(r.tiers);
    return n;
  }

  residency(): Map<string, number> {
    const out = new Map<string, number>();
    for (const r of this.records.values()) if (r.key !== null) out.set(r.key, (out.get(r.key) ?? 0) | r.tiers);
    return out;
  }

  keyOf(parent: string | null, tokens: ArrayLike<number>, start: number): string {
    return this.keyWith(parent, tokens, start, null);
  }

  keyWith(parent: string | null, tokens: ArrayLike<number>, start: number, suffix: Uint8Array | null): string {
    const out = new Uint8Array(16);
    const p = parent === null ? null : Uint8Array.from(Buffer.from(parent, 'hex'));
    this.hasher.keyInto(p, 0, tokens, start, this.blockSize, out, 0, suffix);
    const hex = contentKeyHex(out);
    this.seenKeys.add(hex);
    return hex;
  }

  /** cache-identity §4 rule 4: the indexed group, −1 before the first reusable store. */
  group = -1;

  apply(e: KvEvent, skipped: SkipCounters): void {
    if (e.kind === 'removed') {
      if (this.group >= 0 && e.group !== this.group) {
        skipped.group = (skipped.group ?? 0) + e.blockHashes.length;
        return;
      }
      for (const h of e.blockHashes) {
        const r = this.records.get(h);
        if (!r) continue;
        r.tiers &= ~e.tier;
        if (r.tiers === 0) this.records.delete(h);
      }
      return;
    }
    if (e.kind === 'cleared') {
      for (const [h, r] of [...this.records]) {
        r.tiers &= ~e.tiers;
        if (r.tiers === 0) this.records.delete(h);
      }
      return;
    }
    // Rule 4: the lowest reusable group seen; other groups ignored and counted.
    if (!e.reusableGroup || (this.group >= 0 && e.group > this.group)) {
      skipped.group = (skipped.group ?? 0) + e.blockHashes.length;
      return;
    }
    if (this.group >= 0 && e.group < this.group) {
      this.group = e.group;
      throw new ReferenceError('inconsistent');
    }
    this.group = e.group;
    const m = e.tier;
    const hashes = [...e.blockHashes];
    // Rules 1–2: every block out (lora_id alone) or out from the first unreproducible one on.
    const blockOut = (i: number): boolean => e.outOfScope || i >= e.reproducibleBlocks;
    const countOut = (): void => {
      if (e.outOfScope) skipped.outOfScope++;
      else skipped.multimodal = (skipped.multimodal ?? 0) + 1;
    };
    const out = e.outOfScope || (hashes.length > 0 && blockOut(0));
    if (e.tokenIds.length === 0) {
      if (e.parentBlockHash !== null && !out && !this.records.has(e.parentBlockHash)) throw new ReferenceError('inconsistent');
      for (let i = 0; i < hashes.length; i++) {
        const r = this.records.get(hashes[i]);
        if (r) this.addTier(r, m);
        else if (blockOut(i)) countOut();
        else throw new ReferenceError('inconsistent');
      }
      return;
    }
    const bs = this.blockSize;
    if (!out && (e.blockSize !== bs || e.tokenIds.length !== bs * hashes.length)) throw new ReferenceError('protocol');
    let p: Parent = null;
    if (out) p = UNI;
    else if (e.parentBlockHash !== null) {
      const r = this.records.get(e.parentBlockHash);
      if (!r) throw new ReferenceError('inconsistent');
      p = r.key === null ? UNI : r.key;
    }
    for (let i = 0; i < hashes.length; i++) {
      if (blockOut(i)) p = UNI;
      // cache-identity §3: the salt term only on a block with no parent.
      const k = p === UNI ? null : this.keyWith(p, e.tokenIds, i * bs, p === null ? e.identity.rootSuffix : e.identity.chainSuffix);
      if (k !== null) this.seenKeys.add(k);
      let r = this.records.get(hashes[i]);
      const created = !r;
      if (!r) {
        this.budget(1);
        r = { key: k, tiers: m };
        this.records.set(hashes[i], r);
      } else {
        if (k !== null && r.key !== null && r.key !== k) throw new ReferenceError('inconsistent');
        if (r.key === null && k !== null) r.key = k;
        this.addTier(r, m);
      }
      if (blockOut(i)) {
        if (created) countOut();
      } else {
        p = r.key === null ? UNI : r.key;
        if (r.key === null && created) skipped.descendant++;
      }
    }
  }

  /** Prefix walk (§8) over the model's residency. */
  match(keysHex: readonly string[]): [number, number] {
    const res = this.residency();
    let device = 0;
    let hostOnly = 0;
    for (const k of keysHex) {
      const t = res.get(k) ?? 0;
      if (t === 0) break;
      if (t & 1) device++;
      else hostOnly++;
    }
    return [device, hostOnly];
  }

  private addTier(r: ReferenceRecord, m: number): void {
    if ((r.tiers & m) === 0) this.budget(1);
    r.tiers |= m;
  }

  private budget(n: number): void {
    if (this.entries() + n > this.maxEntries) throw new ReferenceError('limit');
  }
}
