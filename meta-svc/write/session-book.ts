/**
 * Write sessions shared between replicas (kvcm-meta §9.4: "write sessions" become shared): a
 * session opened on one replica can be finished on any other, expires once cluster-wide, and
 * outlives the replica that opened it (the background-lease holder sweeps expired ones). The
 * local `WriteSessions` keeps its own map and timers; the book is the cluster-wide claim: a
 * session is finished or expired by whoever `take`s it first (exactly one winner).
 */

export interface SessionRecord {
  readonly id: string;
  readonly instanceId: string;
  readonly groupName: string;
  readonly newKeys: readonly { readonly blockKey: bigint; readonly locationId: string; readonly rev: number }[];
  readonly deadlineMs: number;
}

export interface SessionBook {
  put(rec: SessionRecord): Promise<void>;
  /** The record without claiming it (validation before the claim). */
  peek(id: string): Promise<SessionRecord | null>;
  /** Claims and removes it; null when another replica (or expiry) already did. */
  take(id: string): Promise<SessionRecord | null>;
  /** Claims up to `limit` sessions whose deadline passed. */
  takeExpired(nowMs: number, limit: number): Promise<SessionRecord[]>;
  /** Removes the instance's sessions (trimCache); returns how many. */
  cancelInstance(instanceId: string): Promise<number>;
}

/** JSON with block keys as decimal strings. */
export function encodeSessionRecord(rec: SessionRecord): string {
  return JSON.stringify({ ...rec, newKeys: rec.newKeys.map((k) => ({ ...k, blockKey: k.blockKey.toString() })) });
}

export function decodeSessionRecord(text: string): SessionRecord {
  const raw = JSON.parse(text) as Omit<SessionRecord, 'newKeys'> & { newKeys: { blockKey: string; locationId: string; rev: number }[] };
  return { ...raw, newKeys: raw.newKeys.map((k) => ({ ...k, blockKey: BigInt(k.blockKey) })) };
}
