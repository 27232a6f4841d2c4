/**
 * A stream's identity (instance name, dp rank; kv-events §9), its map key and its order, in one
 * place: the directory, discovery, the config parser and the view all key and sort streams alike.
 */

export interface StreamIdentity {
  readonly instanceName: string;
  readonly dpRank: number;
}

/** Map key of (instance name, dp rank); NUL cannot occur in an instance name. */
export function streamKey(instanceName: string, dpRank: number): string {
  return `${instanceName}\u0000${dpRank}`;
}

/** Orders streams by instance name (UTF-16 code units, locale-independent), then dp rank. */
export function byNameThenRank(a: StreamIdentity, b: StreamIdentity): number {
  if (a.instanceName !== b.instanceName) return a.instanceName < b.instanceName ? -1 : 1;
  return a.dpRank - b.dpRank;
}
