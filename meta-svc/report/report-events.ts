/**
 * reportEvent input as domain values, and the pure request checks of kvcm-meta §7.3 (shapes)
 * and §7.4 (items). The wire layer (rpc/report-event.ts) decodes JSON into `DecodedEvent`s; this
 * module turns them into validated events or per-item INVALID_ARGUMENT, with no side effect.
 */
import { ReportEventType } from '../meta-enums.js';
import { MAX_URI_BYTES, hasSVersionParam, hasUriSyntax } from './report-location-id.js';

export interface WireSpec {
  readonly name: string;
  readonly uri: string;
}

export interface WireBlock {
  readonly blockKey: string;
  readonly medium: string;
  readonly specs: readonly WireSpec[];
}

/**
 * One EventItem as read from the wire. `memberOk` is §7.1: the member matching `eventType` is
 * present and no other member is set.
 */
export type DecodedEvent =
  | { readonly eventType: typeof ReportEventType.EVENT_NODE_REGISTER; readonly memberOk: boolean; readonly mediums: readonly string[] }
  | ({ readonly eventType: typeof ReportEventType.EVENT_BLOCK_ADD; readonly memberOk: boolean } & WireBlock)
  | {
      readonly eventType: typeof ReportEventType.EVENT_BLOCK_DELETE;
      readonly memberOk: boolean;
      readonly blockKey: string;
      readonly medium: string;
      readonly specNames: readonly string[];
    }
  | { readonly eventType: typeof ReportEventType.EVENT_HOST_DOWN; readonly memberOk: boolean }
  | { readonly eventType: typeof ReportEventType.EVENT_HEARTBEAT; readonly memberOk: boolean }
  | { readonly eventType: typeof ReportEventType.EVENT_BLOCK_SNAPSHOT; readonly memberOk: boolean; readonly blocks: readonly WireBlock[] }
  /** EVENT_UNSPECIFIED or an unknown number: always INVALID_ARGUMENT (§7.1). */
  | { readonly eventType: number; readonly memberOk: false };

export interface ValidBlock {
  /** Canonical signed 64-bit key (§7.4). */
  readonly blockKey: bigint;
  /** Lowercased (§7.4). */
  readonly medium: string;
  readonly specs: readonly WireSpec[];
}

/** A validated event, ready to execute. */
export type ValidEvent =
  | { readonly kind: 'register'; readonly mediums: readonly string[] }
  | ({ readonly kind: 'add' } & ValidBlock)
  | { readonly kind: 'delete'; readonly blockKey: bigint; readonly medium: string; readonly specNames: readonly string[] }
  | { readonly kind: 'host_down' }
  | { readonly kind: 'heartbeat' }
  | { readonly kind: 'snapshot'; readonly blocks: readonly ValidBlock[] };

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;
const DECIMAL = /^-?[0-9]+$/;

/**
 * §7.4 block_key: decimal in [−2^63, 2^64−1], optional `-`, leading zeros allowed, nothing else.
 * Values ≥ 2^63 are the same 64-bit pattern (`"18446744073709551615"` ≡ `"-1"`). null = invalid.
 */
export function parseReportBlockKey(s: string): bigint | null {
  if (!DECIMAL.test(s)) return null;
  const v = BigInt(s);
  // ≤ 18 characters is below 10^18 < 2^63 in magnitude: already canonical.
  if (s.length <= 18) return v;
  if (v < INT64_MIN || v > UINT64_MAX) return null;
  return BigInt.asIntN(64, v);
}

const MAX_MEDIUM_BYTES = 64;

/** §7.4 medium: non-empty, ≤ 64 bytes, no `#`; returns the lowercased medium or null. */
export function normalizeMedium(medium: string): string | null {
  if (medium === '' || medium.includes('#')) return null;
  if (byteLengthOver(medium, MAX_MEDIUM_BYTES)) return null;
  return medium.toLowerCase();
}

/** §7.4 URI: ≤ 4096 bytes, the scheme://… syntax, and no client-sent s_version (§7.6). */
export function isValidReportUri(uri: string): boolean {
  return !byteLengthOver(uri, MAX_URI_BYTES) && hasUriSyntax(uri) && !hasSVersionParam(uri);
}

/** UTF-8 length > max, without encoding short strings (a UTF-16 unit is at most 3 bytes). */
function byteLengthOver(s: string, max: number): boolean {
  if (s.length > max) return true;
  if (s.length * 3 <= max) return false;
  return Buffer.byteLength(s, 'utf8') > max;
}

/** §7.3: true when the request shape is allowed (else whole-request INVALID_ARGUMENT). */
export function isAllowedShape(events: readonly DecodedEvent[], maxEventsPerRequest: number): boolean {
  if (events.length > maxEventsPerRequest) return false;
  let snapshots = 0;
  let hostDowns = 0;
  let deltas = 0;
  for (const e of events) {
    if (e.eventType === ReportEventType.EVENT_BLOCK_SNAPSHOT) snapshots++;
    else if (e.eventType === ReportEventType.EVENT_HOST_DOWN) hostDowns++;
    else if (e.eventType === ReportEventType.EVENT_BLOCK_ADD || e.eventType === ReportEventType.EVENT_BLOCK_DELETE) deltas++;
  }
  if (hostDowns > 0 && events.length > 1) return false;
  if (snapshots > 1) return false;
  if (snapshots === 1 && deltas > 0) return false;
  return true;
}

/**
 * §7.4 for one item; null = INVALID_ARGUMENT. Spec names are not checked against the instance's
 * `location_spec_infos` (KVCM parity): reporters name their own specs (`linear_0`, `full_3`, `a#b`).
 */
export function validateEvent(e: DecodedEvent): ValidEvent | null {
  if (!e.memberOk) return null;
  switch (e.eventType) {
    case ReportEventType.EVENT_NODE_REGISTER: {
      const ev = e as Extract<DecodedEvent, { eventType: 1 }>;
      const mediums: string[] = [];
      for (const m of ev.mediums) {
        const n = normalizeMedium(m);
        if (n === null) return null;
        mediums.push(n);
      }
      return { kind: 'register', mediums };
    }
    case ReportEventType.EVENT_BLOCK_ADD: {
      const ev = e as Extract<DecodedEvent, { eventType: 2 }>;
      const blockKey = parseReportBlockKey(ev.blockKey);
      const medium = normalizeMedium(ev.medium);
      if (blockKey === null || medium === null || !areValidSpecs(ev.specs)) return null;
      return { kind: 'add', blockKey, medium, specs: ev.specs };
    }
    case ReportEventType.EVENT_BLOCK_DELETE: {
      const ev = e as Extract<DecodedEvent, { eventType: 3 }>;
      const blockKey = parseReportBlockKey(ev.blockKey);
      const medium = normalizeMedium(ev.medium);
      if (blockKey === null || medium === null || ev.specNames.length === 0) return null;
      const seen = new Set<string>();
      for (const name of ev.specNames) {
        if (name === '' || seen.has(name)) return null;
        seen.add(name);
      }
      return { kind: 'delete', blockKey, medium, specNames: ev.specNames };
    }
    case ReportEventType.EVENT_HOST_DOWN:
      return { kind: 'host_down' };
    case ReportEventType.EVENT_HEARTBEAT:
      return { kind: 'heartbeat' };
    case ReportEventType.EVENT_BLOCK_SNAPSHOT: {
      const ev = e as Extract<DecodedEvent, { eventType: 6 }>;
      const blocks: ValidBlock[] = [];
      const seen = new Set<string>();
      for (const wb of ev.blocks) {
        const b = validateBlock(wb);
        if (b === null) return null;
        // Each (canonical key, medium) at most once: "1" and "01" collide (§7.4).
        const k = `${b.blockKey}#${b.medium}`;
        if (seen.has(k)) return null;
        seen.add(k);
        blocks.push(b);
      }
      return { kind: 'snapshot', blocks };
    }
    default:
      return null;
  }
}

function validateBlock(b: WireBlock): ValidBlock | null {
  const blockKey = parseReportBlockKey(b.blockKey);
  const medium = normalizeMedium(b.medium);
  if (blockKey === null || medium === null || !areValidSpecs(b.specs)) return null;
  return { blockKey, medium, specs: b.specs };
}

/** §7.4 specs of an ADD or snapshot block: non-empty; names non-empty and unique; URIs valid. */
function areValidSpecs(specs: readonly WireSpec[]): boolean {
  if (specs.length === 0) return false;
  if (specs.length === 1) {
    const s = specs[0] as WireSpec;
    return s.name !== '' && isValidReportUri(s.uri);
  }
  const seen = new Set<string>();
  for (const s of specs) {
    if (s.name === '' || seen.has(s.name) || !isValidReportUri(s.uri)) return false;
    seen.add(s.name);
  }
  return true;
}
