/**
 * Pure: what one DNS name's latest lookup means for the set of engines it stands for (engines.md
 * §6). The lookup itself is dns-lookup.ts; this class only decides:
 *
 * - records: they are the set in force at once (joins and leaves follow from the difference);
 * - no records (NXDOMAIN or an empty answer): the set empties only when the previous resolution
 *   was empty too, so one bad answer (a Service briefly without ready endpoints, a zone reload)
 *   never drops a whole fleet;
 * - a resolver error (timeout, SERVFAIL, refused): the last good set stays; the caller logs each
 *   distinct error once (`newError`) and counts every one. Errors are no answer: they neither
 *   count towards nor break the two-empty rule.
 */

/** One engine a lookup found: an address and, from an SRV record, its port (null: the entry's port). */
export interface DnsTarget {
  /** As the resolver returns it: `10.0.0.5`, `fd00::5`. */
  readonly address: string;
  readonly port: number | null;
}

export type DnsOutcome =
  | { readonly kind: 'records'; readonly targets: readonly DnsTarget[] }
  | { readonly kind: 'empty'; readonly detail: string }
  | { readonly kind: 'error'; readonly code: string; readonly detail: string };

export interface DnsUpdate {
  /** The targets in force after this outcome, sorted. */
  readonly targets: readonly DnsTarget[];
  /** The set in force changed. */
  readonly changed: boolean;
  /** An empty answer was held back (the set stays until a second one agrees). */
  readonly heldEmpty: boolean;
  /** A resolver error unlike the previous one (log it); null otherwise. */
  readonly newError: string | null;
  /** The first answer after an error episode. */
  readonly recovered: boolean;
}

export class DnsNameState {
  private inForce: readonly DnsTarget[] = Object.freeze([]);
  /** The previous answer was empty (NXDOMAIN or no records). */
  private lastEmpty = false;
  private lastError: string | null = null;
  private answered = false;

  get targets(): readonly DnsTarget[] {
    return this.inForce;
  }

  /** Whether any answer (records or empty) has arrived yet. */
  get hasAnswered(): boolean {
    return this.answered;
  }

  apply(outcome: DnsOutcome): DnsUpdate {
    if (outcome.kind === 'error') {
      const text = `${outcome.code}: ${outcome.detail}`;
      const newError = text === this.lastError ? null : text;
      this.lastError = text;
      return { targets: this.inForce, changed: false, heldEmpty: false, newError, recovered: false };
    }
    const recovered = this.lastError !== null;
    this.lastError = null;
    this.answered = true;
    if (outcome.kind === 'empty') {
      const confirmed = this.lastEmpty;
      this.lastEmpty = true;
      if (!confirmed && this.inForce.length > 0) return { targets: this.inForce, changed: false, heldEmpty: true, newError: null, recovered };
      return this.replace(Object.freeze([]), recovered);
    }
    this.lastEmpty = false;
    return this.replace(normalized(outcome.targets), recovered);
  }

  private replace(next: readonly DnsTarget[], recovered: boolean): DnsUpdate {
    const changed = !sameTargets(this.inForce, next);
    if (changed) this.inForce = next;
    return { targets: this.inForce, changed, heldEmpty: false, newError: null, recovered };
  }
}

/** Sorted (address, then port) with duplicates dropped, so equal answers compare equal. */
function normalized(targets: readonly DnsTarget[]): readonly DnsTarget[] {
  const byKey = new Map<string, DnsTarget>();
  for (const t of targets) byKey.set(`${t.address}|${t.port ?? ''}`, Object.freeze({ address: t.address, port: t.port }));
  return Object.freeze([...byKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, t]) => t));
}

function sameTargets(a: readonly DnsTarget[], b: readonly DnsTarget[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.address !== b[i]!.address || a[i]!.port !== b[i]!.port) return false;
  return true;
}
