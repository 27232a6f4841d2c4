/**
 * One stream's served state in a form both sides of the view stream can be reduced to: the
 * directory's subscriber at the moment a version is encoded, and the router's ViewModel after it
 * applied that version. The view-stream property suites compare the two.
 */
import type { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { ModelStream } from './view-model.js';
import { residencyMap } from './view-model.js';

export interface StreamTruth {
  readonly synchronized: boolean;
  readonly sequence: string;
  readonly deviceBlocks: number;
  readonly hostBlocks: number;
  /** key hex → tier bits. */
  readonly residency: Map<string, number>;
}

/** What the directory serves for `sub` now. */
export function directoryTruth(sub: StreamSubscriber): StreamTruth {
  const index = sub.index;
  return {
    synchronized: sub.state === 'SYNCHRONIZED',
    sequence: sub.sequence.toString(),
    deviceBlocks: index === null ? 0 : index.deviceBlocks,
    hostBlocks: index === null ? 0 : index.hostBlocks,
    residency: index === null ? new Map() : residencyMap(index.exportResidency()),
  };
}

/** What the router holds for stream `s`. */
export function routerTruth(s: ModelStream): StreamTruth {
  return {
    synchronized: s.state.synchronized,
    sequence: s.state.sequence,
    deviceBlocks: Number(s.state.device_blocks),
    hostBlocks: Number(s.state.host_blocks),
    residency: s.residency,
  };
}

export function truthEqual(a: StreamTruth, b: StreamTruth): boolean {
  if (a.synchronized !== b.synchronized || a.sequence !== b.sequence || a.deviceBlocks !== b.deviceBlocks || a.hostBlocks !== b.hostBlocks) return false;
  if (a.residency.size !== b.residency.size) return false;
  for (const [k, t] of a.residency) if (b.residency.get(k) !== t) return false;
  return true;
}

/** `sync=… seq=… keys=… dev=… host=…`, or `absent`. */
export function describeTruth(t: StreamTruth | undefined): string {
  return t === undefined ? 'absent' : `sync=${t.synchronized} seq=${t.sequence} keys=${t.residency.size} dev=${t.deviceBlocks} host=${t.hostBlocks}`;
}
