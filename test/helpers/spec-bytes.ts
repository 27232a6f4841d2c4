// Byte fixtures written in the specs' own notation, shared by the pure decoder unit suite and the
// stream-level protocol suites, so both check exactly the bytes kv-events.md prints.

/** Bytes from the spec's notation: hex pairs and "quoted ASCII", e.g. `a4 "type"` (§3.5, §4). */
export function specBytes(notation: string): Uint8Array {
  const out: number[] = [];
  const re = /"([^"]*)"|([0-9a-fA-F]{2})/g;
  for (let m = re.exec(notation); m !== null; m = re.exec(notation)) {
    if (m[1] !== undefined) for (const c of Buffer.from(m[1], 'ascii')) out.push(c);
    else out.push(parseInt(m[2]!, 16));
  }
  return Uint8Array.from(out);
}

/** The parts one after another, as a fresh Uint8Array. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  return Uint8Array.from(Buffer.concat(parts));
}

// kv-events §3.5 fixtures, exactly as the spec writes them (block_size 4, hashes 11 and 12,
// tokens 1..8, ts 1700000000.5, dp rank 0).

/** Positional batch with one positional BlockStored. */
export const POSITIONAL_BATCH = specBytes(`
  93 cb 41 d9 54 fc 40 20 00 00 91
  97 ab "BlockStored"
  92 0b 0c  c0  98 01 02 03 04 05 06 07 08
  04  c0  a3 67 70 75
  00`);
/** The same BlockStored in map form. */
export const MAP_EVENT = specBytes(`
  86 a4 "type" ab "BlockStored" ac "block_hashes" 92 0b 0c b1 "parent_block_hash" c0
  a9 "token_ids" 98 01 02 03 04 05 06 07 08 aa "block_size" 04 a6 "medium" a3 "gpu"`);
/** Positional batch carrying the map-form event. */
export const ARRAY_BATCH_WITH_MAP_EVENT = concatBytes(specBytes('93 cb 41 d9 54 fc 40 20 00 00 91'), MAP_EVENT, specBytes('00'));
/** Map-form batch carrying the map-form event. */
export const MAP_BATCH = concatBytes(
  specBytes('83 a2 "ts" cb 41 d9 54 fc 40 20 00 00 a6 "events" 91'),
  MAP_EVENT,
  specBytes('b2 "data_parallel_rank" 00'),
);
