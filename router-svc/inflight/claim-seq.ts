/**
 * The directory's arrival order of in-flight decisions (InflightShare.prompt_seqs): a uint32
 * counter per directory process that wraps, compared as serial numbers (RFC 1982). A claim lives
 * at most the in-flight TTL (2 s), far less than the 2³¹ decisions it takes to make the
 * comparison ambiguous.
 */

/** `a` was ordered before `b`. */
export function seqBefore(a: number, b: number): boolean {
  const d = (b - a) >>> 0;
  return d !== 0 && d < 0x80000000;
}
