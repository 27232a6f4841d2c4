/**
 * Decodes a ReportEventRequest (kvcm-meta §7.1) from its parsed JSON into domain values. JSON
 * type errors are the reader's BadRequestErrors (HTTP 400), thrown before any side effect. Used
 * on the event loop for ordinary requests (rpc/report-event.ts) and by the report worker for
 * big ones (offload/report-worker.ts), so both read a request the same way.
 */
import { ReportEventType, StorageType } from '../meta-enums.js';
import type { RequestReader } from '../wire/request-reader.js';
import type { DecodedEvent, WireBlock, WireSpec } from './report-events.js';

export interface ReportRequest {
  readonly instanceId: string;
  /** '' when `events` is empty (§7.2 step 1 reads nothing else). */
  readonly hostIpPort: string;
  /** StorageType number; 0 when `events` is empty. */
  readonly storageType: number;
  readonly events: readonly DecodedEvent[];
}

/** §7.1: params member of each event type. */
const MEMBERS = ['node_register', 'block_add', 'block_delete', 'host_down', 'heartbeat', 'block_snapshot'] as const;
const MEMBER_OF_TYPE: ReadonlyMap<number, (typeof MEMBERS)[number]> = new Map([
  [ReportEventType.EVENT_NODE_REGISTER, 'node_register'],
  [ReportEventType.EVENT_BLOCK_ADD, 'block_add'],
  [ReportEventType.EVENT_BLOCK_DELETE, 'block_delete'],
  [ReportEventType.EVENT_HOST_DOWN, 'host_down'],
  [ReportEventType.EVENT_HEARTBEAT, 'heartbeat'],
  [ReportEventType.EVENT_BLOCK_SNAPSHOT, 'block_snapshot'],
]);

/** The whole request, every event decoded; throws BadRequestError. */
export function decodeReportRequest(req: RequestReader): ReportRequest {
  const eventReaders = req.messages('events');
  const instanceId = req.str('instance_id');
  if (eventReaders.length === 0) return { instanceId, hostIpPort: '', storageType: 0, events: [] };
  const events = new Array<DecodedEvent>(eventReaders.length);
  for (let i = 0; i < eventReaders.length; i++) events[i] = decodeEvent(eventReaders[i] as RequestReader);
  return { instanceId, hostIpPort: req.str('host_ip_port'), storageType: req.enumOf('storage_type', StorageType), events };
}

function decodeEvent(e: RequestReader): DecodedEvent {
  const eventType = e.enumOf('event_type', ReportEventType);
  const member = MEMBER_OF_TYPE.get(eventType);
  if (member === undefined) return { eventType, memberOk: false };
  const p = e.message(member);
  // Common case, checked without probing the five other members by both spellings: the object
  // holds just `event_type` (non-null, since the type is known) and the matching member.
  let memberOk = p !== null;
  if (!(memberOk && e.memberCount === 2)) {
    for (const m of MEMBERS) if (m !== member && e.has(m)) memberOk = false;
  }
  switch (eventType) {
    case ReportEventType.EVENT_NODE_REGISTER:
      return { eventType, memberOk, mediums: p ? p.strList('mediums') : [] };
    case ReportEventType.EVENT_BLOCK_ADD: {
      // `uri` (field 2) is deprecated and ignored (§7.1).
      if (p === null) return { eventType, memberOk, blockKey: '', medium: '', specs: [] };
      return { eventType, memberOk, blockKey: p.str('block_key'), medium: p.str('medium'), specs: decodeSpecs(p) };
    }
    case ReportEventType.EVENT_BLOCK_DELETE:
      return {
        eventType,
        memberOk,
        blockKey: p ? p.str('block_key') : '',
        medium: p ? p.str('medium') : '',
        specNames: p ? p.strList('spec_names') : [],
      };
    case ReportEventType.EVENT_HOST_DOWN:
      return { eventType, memberOk };
    case ReportEventType.EVENT_HEARTBEAT:
      // system_status is opaque (DEBUG log only); read it so a malformed map is a 400.
      if (p) p.map('system_status');
      return { eventType, memberOk };
    default:
      // EVENT_BLOCK_SNAPSHOT; its own `medium` (field 1) is deprecated and ignored.
      return { eventType: ReportEventType.EVENT_BLOCK_SNAPSHOT, memberOk, blocks: p ? decodeBlocks(p.messages('blocks')) : [] };
  }
}

function decodeBlocks(readers: readonly RequestReader[]): WireBlock[] {
  const blocks = new Array<WireBlock>(readers.length);
  for (let i = 0; i < readers.length; i++) {
    const b = readers[i] as RequestReader;
    blocks[i] = { blockKey: b.str('block_key'), medium: b.str('medium'), specs: decodeSpecs(b) };
  }
  return blocks;
}

function decodeSpecs(b: RequestReader): WireSpec[] {
  const specReaders = b.messages('specs');
  const specs: WireSpec[] = new Array<WireSpec>(specReaders.length);
  for (let i = 0; i < specReaders.length; i++) {
    const s = specReaders[i] as RequestReader;
    specs[i] = { name: s.str('name'), uri: s.str('uri') };
  }
  return specs;
}
