/**
 * The gRPC edge of in-flight load (routing.md "In-flight load"): `ReportInflight`, a client
 * stream of InflightReport messages. Each message is checked here (one line naming the field);
 * a malformed one ends the call with INVALID_ARGUMENT and nothing of it is applied, a good one
 * goes to the InflightService at once. The call is answered when the router ends it.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../shared/log/logger.js';
import type { WireInflightReport, WireMovedClaim, WireOutstandingPrefill } from '../../shared/view/view-wire.js';
import { FINGERPRINT_BYTES_EXPECTED, isFingerprintBytes, PENDING_PROMPTS_PER_SHARE } from '../../shared/keys/prompt-fingerprint.js';

/** What the handler feeds; `InflightService` implements it. */
export interface InflightApi {
  report(msg: WireInflightReport): void;
  /** The stream of `routerId` ended: its outstanding-prefill gauges go (its decisions end as they would). */
  routerGone?(routerId: string): void;
}

/** Bounds of one message: far above any real batch (10 ms of one router's decisions). */
export const INFLIGHT_LIMITS = Object.freeze({ routerIdChars: 256, instanceNameChars: 1024, decisions: 65536, count: 1_000_000, ageMs: 60_000, withdrawnSeqs: 65536 });

/** Why `msg` is malformed (one line naming the field), or null. */
export function checkInflightReport(msg: Partial<WireInflightReport> | undefined): string | null {
  const L = INFLIGHT_LIMITS;
  const id = msg?.router_id;
  if (typeof id !== 'string' || id === '' || id.length > L.routerIdChars) return `router_id: expected 1..${L.routerIdChars} characters`;
  const ds = msg?.decisions;
  if (!Array.isArray(ds) || ds.length > L.decisions) return `decisions: expected at most ${L.decisions} entries`;
  for (let i = 0; i < ds.length; i++) {
    const d = ds[i]!;
    if (typeof d.instance_name !== 'string' || d.instance_name === '' || d.instance_name.length > L.instanceNameChars) {
      return `decisions[${i}].instance_name: expected 1..${L.instanceNameChars} characters`;
    }
    // Older routers leave `answered` and `withdrawn_seqs` out; a message may carry only those (count 0).
    const answered = d.answered ?? 0;
    if (!Number.isInteger(answered) || answered < 0 || answered > L.count) return `decisions[${i}].answered: expected an integer in [0, ${L.count}], got ${String(d.answered)}`;
    const withdrawn = d.withdrawn_seqs ?? [];
    const badWithdrawn = checkSeqs('withdrawn_seqs', withdrawn);
    if (badWithdrawn !== null) return `decisions[${i}].${badWithdrawn}`;
    // Older routers leave `settled_seqs` out; a message may carry only it (count 0).
    const settled = d.settled_seqs ?? [];
    const badSettled = checkSeqs('settled_seqs', settled);
    if (badSettled !== null) return `decisions[${i}].${badSettled}`;
    const outstanding = d.outstanding_prefill ?? null;
    if (outstanding !== null) {
      const bad = checkOutstanding(outstanding);
      if (bad !== null) return `decisions[${i}].outstanding_prefill.${bad}`;
    }
    const least = answered > 0 || withdrawn.length > 0 || settled.length > 0 || outstanding !== null ? 0 : 1;
    if (!Number.isInteger(d.count) || d.count < least || d.count > L.count) return `decisions[${i}].count: expected an integer in [${least}, ${L.count}], got ${String(d.count)}`;
    if (!Number.isInteger(d.age_ms) || d.age_ms < 0 || d.age_ms > L.ageMs) return `decisions[${i}].age_ms: expected an integer in [0, ${L.ageMs}], got ${String(d.age_ms)}`;
    const badPrompts = checkPrompts(d.prompts, d.count, `count (${d.count}) entries`);
    if (badPrompts !== null) return `decisions[${i}].${badPrompts}`;
    const promptCount = Array.isArray(d.prompts) ? d.prompts.length : 0;
    const badMoved = checkMovedClaims(d.moved_claims, promptCount);
    if (badMoved !== null) return `decisions[${i}].${badMoved}`;
    const badOpen = checkOpenClaims(d.open_claims, promptCount);
    if (badOpen !== null) return `decisions[${i}].${badOpen}`;
    // Routers without the TTFT policy's work accounting leave prefill_tokens out.
    const tokens = d.prefill_tokens ?? [];
    if (!Array.isArray(tokens) || tokens.length > d.count) return `decisions[${i}].prefill_tokens: expected at most count (${d.count}) entries, got ${Array.isArray(tokens) ? tokens.length : typeof tokens}`;
    const badTokens = badIntegerIn('prefill_tokens', tokens, 0xffffffff, 'a uint32');
    if (badTokens !== null) return `decisions[${i}].${badTokens}`;
  }
  return null;
}

/** Why an entry of `list` (field `name`) is not an integer in [0, `most`] (`says` in the message), or null. */
function badIntegerIn(name: string, list: readonly unknown[], most: number, says: string): string | null {
  for (let j = 0; j < list.length; j++) {
    const v = list[j];
    if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > most) return `${name}[${j}]: expected ${says}, got ${String(v)}`;
  }
  return null;
}

/** Why a list of directory seqs (`name`: withdrawn_seqs, settled_seqs) is malformed: at most INFLIGHT_LIMITS.withdrawnSeqs uint32s. */
function checkSeqs(name: string, seqs: unknown): string | null {
  const most = INFLIGHT_LIMITS.withdrawnSeqs;
  if (!Array.isArray(seqs) || seqs.length > most) return `${name}: expected at most ${most} entries, got ${Array.isArray(seqs) ? seqs.length : typeof seqs}`;
  return badIntegerIn(name, seqs, 0xffffffff, 'a uint32');
}

/** Why `open_claims` is malformed (older routers leave it out): distinct indexes into `prompts` entries. */
function checkOpenClaims(open: unknown, prompts: number): string | null {
  const list = open ?? [];
  if (!Array.isArray(list) || list.length > prompts) return `open_claims: expected at most prompts (${prompts}) entries, got ${Array.isArray(list) ? list.length : typeof list}`;
  const seen = new Set<number>();
  for (let j = 0; j < list.length; j++) {
    const bad = badPromptIndex(list[j], prompts, seen);
    if (bad !== null) return `open_claims[${j}]: ${bad}`;
  }
  return null;
}

/** Why `at` is not a distinct index into `prompts` entries (recorded in `seen` when it is), or null. */
function badPromptIndex(at: unknown, prompts: number, seen: Set<number>): string | null {
  if (!Number.isInteger(at) || (at as number) < 0 || (at as number) >= prompts || seen.has(at as number)) return `expected a distinct index into prompts (0..${prompts - 1}), got ${String(at)}`;
  seen.add(at as number);
  return null;
}

/** Why `moved_claims` is malformed (older routers leave it out): each names a distinct prompt of `prompts` entries with a uint32 seq. */
function checkMovedClaims(moved: readonly Partial<WireMovedClaim>[] | undefined | null, prompts: number): string | null {
  const list = moved ?? [];
  if (!Array.isArray(list) || list.length > prompts) return `moved_claims: expected at most prompts (${prompts}) entries, got ${Array.isArray(list) ? list.length : typeof list}`;
  const seen = new Set<number>();
  for (let j = 0; j < list.length; j++) {
    const { prompt_index: at, seq } = list[j] ?? {};
    const badAt = badPromptIndex(at, prompts, seen);
    if (badAt !== null) return `moved_claims[${j}].prompt_index: ${badAt}`;
    if (!Number.isInteger(seq) || seq! < 0 || seq! > 0xffffffff) return `moved_claims[${j}].seq: expected a uint32, got ${String(seq)}`;
  }
  return null;
}

/** Why an outstanding-prefill gauge is malformed (the field and what was expected), or null. */
function checkOutstanding(o: Partial<WireOutstandingPrefill>): string | null {
  const tokens = typeof o.tokens === 'string' && /^\d+$/.test(o.tokens) ? Number(o.tokens) : o.tokens;
  if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens < 0) return `tokens: expected an integer ≥ 0, got ${String(o.tokens)}`;
  const requests = o.requests;
  if (!Number.isInteger(requests) || requests! < 0 || requests! > INFLIGHT_LIMITS.count) return `requests: expected an integer in [0, ${INFLIGHT_LIMITS.count}], got ${String(requests)}`;
  // Routers without the head leave these out (0).
  const head = o.head_tokens === undefined ? 0 : typeof o.head_tokens === 'string' && /^\d+$/.test(o.head_tokens) ? Number(o.head_tokens) : o.head_tokens;
  if (typeof head !== 'number' || !Number.isSafeInteger(head) || head < 0 || head > tokens) return `head_tokens: expected an integer in [0, tokens (${tokens})], got ${String(o.head_tokens)}`;
  for (const field of ['head_age_ms', 'last_end_age_ms'] as const) {
    const v = o[field] ?? 0;
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) return `${field}: expected a uint32, got ${String(o[field])}`;
  }
  const most = Math.min(PENDING_PROMPTS_PER_SHARE, requests!);
  const badPrompts = checkPrompts(o.prompts, most, `${most} entries (requests, at most ${PENDING_PROMPTS_PER_SHARE})`);
  if (badPrompts !== null) return badPrompts;
  return checkPromptTokens(o.prompt_tokens, Array.isArray(o.prompts) ? o.prompts.length : 0, tokens);
}

/** Why a gauge's `prompt_tokens` is malformed (older routers leave it out): one integer in [0, `tokens`] per prompt. */
function checkPromptTokens(perPrompt: unknown, prompts: number, tokens: number): string | null {
  const list = perPrompt ?? [];
  if (!Array.isArray(list) || (list.length !== 0 && list.length !== prompts)) return `prompt_tokens: expected none or one per prompt (${prompts}), got ${Array.isArray(list) ? list.length : typeof list}`;
  return badIntegerIn('prompt_tokens', list, tokens, `an integer in [0, tokens (${tokens})]`);
}

/**
 * Why a list of prompt fingerprints (pending prefixes) is malformed — `prompts` or `prompts[j]`
 * and what was expected, at most `most` of them (`mostSays` in the message) — or null.
 */
function checkPrompts(prompts: readonly unknown[] | undefined | null, most: number, mostSays: string): string | null {
  const list = prompts ?? [];
  if (!Array.isArray(list) || list.length > most) return `prompts: expected at most ${mostSays}, got ${Array.isArray(list) ? list.length : typeof list}`;
  for (let j = 0; j < list.length; j++) {
    const p: unknown = list[j];
    if (!(p instanceof Uint8Array) || !isFingerprintBytes(p)) return `prompts[${j}]: expected ${FINGERPRINT_BYTES_EXPECTED}, got ${p instanceof Uint8Array ? `${p.length} bytes` : typeof p}`;
  }
  return null;
}

export function inflightHandlers(api: InflightApi, log: Logger): grpc.UntypedServiceImplementation {
  const reportInflight: grpc.handleClientStreamingCall<WireInflightReport, Record<string, never>> = (call, callback) => {
    let done = false;
    const finish = (err: Partial<grpc.StatusObject> | null): void => {
      if (done) return;
      done = true;
      if (err === null) callback(null, {});
      else callback(err);
    };
    let routerId: string | null = null;
    const gone = (): void => {
      if (routerId !== null) api.routerGone?.(routerId);
    };
    call.on('data', (msg: WireInflightReport) => {
      if (done) return;
      const bad = checkInflightReport(msg);
      if (bad !== null) {
        log.warn({ rpc: 'ReportInflight', peer: call.getPeer(), err: bad }, 'in-flight report refused');
        finish({ code: grpc.status.INVALID_ARGUMENT, details: `ReportInflight: ${bad}` });
        return;
      }
      routerId = msg.router_id;
      try {
        api.report(msg);
      } catch (e) {
        const detail = e instanceof Error ? e.message : String(e);
        log.error({ rpc: 'ReportInflight', err: detail }, 'gRPC handler failed');
        finish({ code: grpc.status.INTERNAL, details: `ReportInflight: ${detail}` });
      }
    });
    call.on('end', () => {
      gone();
      finish(null);
    });
    call.on('error', () => {
      gone();
      finish(null);
    });
  };
  return { ReportInflight: reportInflight };
}
