/**
 * XXH3-128 through hash-wasm's own WebAssembly build of xxHash, called without hash-wasm's JS
 * wrapper. The wrapper copies the input into the module's memory, makes a subarray per update and
 * a new Uint8Array per digest: at 528 bytes per block (kv-events §4: parent key + 128 int32 token
 * ids) that is most of a content key's cost (bench/query `hash_p50_us`; README "Content-key
 * hashing"). Here the caller writes the preimage straight into the module's input area and the
 * digest is read back in place: three WebAssembly calls and no allocation per key.
 *
 * The binary is the one `createXXHash128` itself instantiates (hash-wasm ships it base64-encoded
 * in dist/xxhash128.umd.min.js); its exports (Hash_GetBuffer, Hash_Init reading the 8-byte seed
 * from the input area, Hash_Update(length), Hash_Final writing the canonical big-endian digest to
 * the input area) are hash-wasm's WASMInterface contract. `load` checks the result against
 * hash-wasm's wrapper on probe inputs and returns null on any difference or failure, and callers
 * then keep using the wrapper: a hash-wasm upgrade can cost speed, never a wrong key.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { IHasher } from 'hash-wasm/dist/lib/WASMInterface.js';

/** The part of the WebAssembly global used here (the project's TypeScript libs do not declare it). */
interface WasmApi {
  readonly Module: new (bytes: Uint8Array) => object;
  readonly Instance: new (module: object, imports: object) => { readonly exports: unknown };
}
const wasm = (globalThis as unknown as { readonly WebAssembly: WasmApi }).WebAssembly;

interface Xxh128Exports {
  readonly memory: { readonly buffer: ArrayBuffer };
  Hash_GetBuffer(): number;
  Hash_Init(bits: number): void;
  Hash_Update(length: number): void;
  Hash_Final(padding: number): void;
}

/** hash-wasm's input area (its MAX_HEAP): the longest preimage hashed in one update. */
const INPUT_BYTES = 16 * 1024;

let compiled: object | null | undefined;

function xxh128Module(): object | null {
  if (compiled !== undefined) return compiled;
  try {
    const dist = dirname(createRequire(import.meta.url).resolve('hash-wasm'));
    const source = readFileSync(join(dist, 'xxhash128.umd.min.js'), 'utf8');
    const data = /name:"xxhash128",data:"([A-Za-z0-9+/=]+)"/.exec(source)?.[1];
    compiled = data === undefined ? null : new wasm.Module(Buffer.from(data, 'base64'));
  } catch {
    compiled = null;
  }
  return compiled;
}

export class Xxh128Direct {
  /** The module's input area: write the preimage here from offset 0 after `begin`. */
  input: Uint8Array;
  /** `input` as int32 words (token ids go in as words on a little-endian host). */
  words: Int32Array;
  readonly capacity = INPUT_BYTES;
  private readonly seedBytes = new Uint8Array(8);

  private constructor(
    private readonly exports: Xxh128Exports,
    private readonly offset: number,
    seed: bigint,
  ) {
    const dv = new DataView(this.seedBytes.buffer);
    dv.setUint32(0, Number(seed & 0xffffffffn), true);
    dv.setUint32(4, Number(seed >> 32n), true);
    this.input = new Uint8Array(exports.memory.buffer, offset, INPUT_BYTES);
    this.words = new Int32Array(exports.memory.buffer, offset, INPUT_BYTES >>> 2);
  }

  /** A direct hasher for `seed`, or null when hash-wasm's binary is not usable this way (checked against `reference`). */
  static load(seed: bigint, reference: IHasher): Xxh128Direct | null {
    const module = xxh128Module();
    if (module === null) return null;
    try {
      const exports = new wasm.Instance(module, {}).exports as Xxh128Exports;
      const offset = exports.Hash_GetBuffer();
      if (offset % 4 !== 0 || offset + INPUT_BYTES > exports.memory.buffer.byteLength) return null;
      const direct = new Xxh128Direct(exports, offset, seed);
      return direct.agreesWith(reference) ? direct : null;
    } catch {
      return null;
    }
  }

  /** Starts a key: the seed goes in (it shares the input area), then the caller writes the preimage. */
  begin(): void {
    if (this.input.byteLength === 0) this.remap();
    this.input.set(this.seedBytes, 0);
    this.exports.Hash_Init(0);
  }

  /** Hashes input[0, length) and writes the 16-byte content key (the digest byte-reversed) to out[at..]. */
  finish(length: number, out: Uint8Array, at: number): void {
    const ex = this.exports;
    ex.Hash_Update(length);
    ex.Hash_Final(0);
    const d = this.input;
    for (let i = 0; i < 16; i++) out[at + i] = d[15 - i]!;
  }

  /** A memory that grew detaches the views. */
  private remap(): void {
    this.input = new Uint8Array(this.exports.memory.buffer, this.offset, INPUT_BYTES);
    this.words = new Int32Array(this.exports.memory.buffer, this.offset, INPUT_BYTES >>> 2);
  }

  private agreesWith(reference: IHasher): boolean {
    const got = new Uint8Array(16);
    for (const length of [0, 16, 100, 528, 4112]) {
      const probe = new Uint8Array(length);
      for (let i = 0; i < length; i++) probe[i] = (i * 131 + length) & 0xff;
      reference.init();
      reference.update(probe);
      const want = reference.digest('binary');
      this.begin();
      this.input.set(probe, 0);
      this.finish(length, got, 0);
      for (let i = 0; i < 16; i++) if (got[i] !== want[15 - i]) return false;
    }
    return true;
  }
}
