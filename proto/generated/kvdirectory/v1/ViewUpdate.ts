// Original file: proto/kvdirectory.proto

import type { ViewSnapshot as _kvdirectory_v1_ViewSnapshot, ViewSnapshot__Output as _kvdirectory_v1_ViewSnapshot__Output } from '../../kvdirectory/v1/ViewSnapshot.js';
import type { ViewDelta as _kvdirectory_v1_ViewDelta, ViewDelta__Output as _kvdirectory_v1_ViewDelta__Output } from '../../kvdirectory/v1/ViewDelta.js';
import type { ViewHeartbeat as _kvdirectory_v1_ViewHeartbeat, ViewHeartbeat__Output as _kvdirectory_v1_ViewHeartbeat__Output } from '../../kvdirectory/v1/ViewHeartbeat.js';
import type { ViewSnapshotChunk as _kvdirectory_v1_ViewSnapshotChunk, ViewSnapshotChunk__Output as _kvdirectory_v1_ViewSnapshotChunk__Output } from '../../kvdirectory/v1/ViewSnapshotChunk.js';
import type { Long } from '@grpc/proto-loader';

export interface ViewUpdate {
  'epoch'?: (string);
  'version'?: (number | string | Long);
  'snapshot'?: (_kvdirectory_v1_ViewSnapshot | null);
  'delta'?: (_kvdirectory_v1_ViewDelta | null);
  'heartbeat'?: (_kvdirectory_v1_ViewHeartbeat | null);
  'sent_at_ms'?: (number | string | Long);
  'snapshot_chunk'?: (_kvdirectory_v1_ViewSnapshotChunk | null);
  'body'?: "snapshot"|"delta"|"heartbeat"|"snapshot_chunk";
}

export interface ViewUpdate__Output {
  'epoch': (string);
  'version': (string);
  'snapshot'?: (_kvdirectory_v1_ViewSnapshot__Output | null);
  'delta'?: (_kvdirectory_v1_ViewDelta__Output | null);
  'heartbeat'?: (_kvdirectory_v1_ViewHeartbeat__Output | null);
  'sent_at_ms': (string);
  'snapshot_chunk'?: (_kvdirectory_v1_ViewSnapshotChunk__Output | null);
  'body'?: "snapshot"|"delta"|"heartbeat"|"snapshot_chunk";
}
