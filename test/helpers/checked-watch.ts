/**
 * A WatchView call seen by a router-side ViewModel, checked after every update against what the
 * directory encoded at that version (the view-stream property suites). Shared here: applying the
 * update, heartbeats (applied, not checked), and an update at a version never encoded. Each suite
 * passes `check`, which compares the model with the truth and returns what differs.
 */
import type * as grpc from '@grpc/grpc-js';
import { ViewModel, type DecodedViewUpdate } from './view-model.js';

/** The differences between `model` at `version` and `want`, each without the watch's label. */
export type ViewCheck<Truth> = (model: ViewModel, want: Truth, version: number, body: DecodedViewUpdate['body']) => readonly string[];

export class CheckedWatch<Truth> {
  readonly model = new ViewModel();
  updates = 0;
  status: grpc.StatusObject | null = null;

  /** `from`: a resumed router keeps what it had applied; the directory sends only what follows. */
  constructor(
    readonly call: grpc.ClientReadableStream<DecodedViewUpdate>,
    truth: ReadonlyMap<number, Truth>,
    violations: string[],
    label: string,
    check: ViewCheck<Truth>,
    from: ViewModel | null = null,
  ) {
    if (from !== null) {
      this.model.epoch = from.epoch;
      this.model.version = from.version;
      for (const [id, s] of from.streams) this.model.streams.set(id, { state: s.state, residency: new Map(s.residency) });
    }
    call.on('data', (u: DecodedViewUpdate) => {
      this.updates++;
      try {
        this.model.apply(u);
      } catch (e) {
        violations.push(`${label}: model refused ${u.body} v${u.version}: ${e instanceof Error ? e.message : String(e)}`);
        return;
      }
      if (u.body === 'heartbeat') return;
      const version = Number(u.version);
      const want = truth.get(version);
      if (want === undefined) {
        violations.push(`${label}: ${u.body} at version ${version} that was never encoded`);
        return;
      }
      for (const detail of check(this.model, want, version, u.body)) violations.push(`${label}: ${detail}`);
    });
    call.on('status', (st: grpc.StatusObject) => {
      this.status = st;
    });
    call.on('error', () => undefined); // ends are expected (cancel, close); the status carries any error
  }
}
