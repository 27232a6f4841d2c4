/**
 * Messages between the MetaService's event loop and its report worker (report-worker.ts).
 * Everything that crosses is small or a typed array: a parse answer carries the plan with
 * `Int32Array` item indexes, never the items themselves, which stay in the worker until the
 * executor asks it to write them (or releases the job).
 */
import type { WorkerStoreLocation } from '../../store/meta-store.js';
import type { ReportPlan } from '../report-plan.js';
import type { ReporterIdentity } from '../reporter-registry.js';

export interface ReportWorkerData {
  readonly store: WorkerStoreLocation;
  /** `http.max_body_bytes`: the parser's character limit (§1.2). */
  readonly maxBodyBytes: number;
  readonly maxEventsPerRequest: number;
}

/** A parsed request as the RPC needs it (§7.2): its common fields, each item's type (metrics) and its plan. */
export interface PreparedReport {
  readonly instanceId: string;
  readonly hostIpPort: string;
  readonly storageType: number;
  readonly eventTypes: ArrayLike<number>;
  readonly plan: ReportPlan;
}

export type OffloadRequest =
  /** One piece of the body of parse `id`, in order. */
  | { readonly kind: 'body'; readonly id: number; readonly part: Uint8Array }
  /** The body of `id` is complete: parse it. */
  | { readonly kind: 'parse'; readonly id: number; readonly byteCount: number }
  | {
      readonly kind: 'delta';
      readonly id: number;
      readonly job: number;
      readonly unit: number;
      readonly target: ReporterIdentity;
      readonly generation: string;
      readonly createTimeUs: bigint;
      /** Touched keys are sent back when at most this many (the SQLite read cache forgets them). */
      readonly maxTouched: number;
    }
  | {
      readonly kind: 'stage';
      readonly id: number;
      readonly job: number;
      readonly unit: number;
      readonly target: ReporterIdentity;
      readonly stageId: string;
      readonly nowUs: bigint;
    }
  | { readonly kind: 'commit'; readonly id: number; readonly stageId: string; readonly maxTouched: number }
  | { readonly kind: 'drop'; readonly id: number; readonly stageId: string }
  | { readonly kind: 'release'; readonly job: number }
  /** Shutdown: the worker closes its store handle, then answers. */
  | { readonly kind: 'close'; readonly id: number };

export type OffloadReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'open_failed'; readonly message: string }
  | { readonly kind: 'parsed'; readonly id: number; readonly job: number; readonly traceId: string; readonly report: PreparedReport }
  /** HTTP 400 (§1.2): not UTF-8, not JSON, or not a ReportEventRequest (§1.3). */
  | { readonly kind: 'bad_request'; readonly id: number; readonly reason: string }
  | { readonly kind: 'done'; readonly id: number; readonly missing: number; readonly touched: BigInt64Array | null }
  | { readonly kind: 'failed'; readonly id: number; readonly message: string; readonly unavailable: boolean };
