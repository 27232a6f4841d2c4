// Original file: proto/kvdirectory.proto

import type { ViewInstance as _kvdirectory_v1_ViewInstance, ViewInstance__Output as _kvdirectory_v1_ViewInstance__Output } from '../../kvdirectory/v1/ViewInstance.js';
import type { ViewStream as _kvdirectory_v1_ViewStream, ViewStream__Output as _kvdirectory_v1_ViewStream__Output } from '../../kvdirectory/v1/ViewStream.js';

export interface ViewSnapshotChunk {
  'index'?: (number);
  'last'?: (boolean);
  'instances'?: (_kvdirectory_v1_ViewInstance)[];
  'streams'?: (_kvdirectory_v1_ViewStream)[];
}

export interface ViewSnapshotChunk__Output {
  'index': (number);
  'last': (boolean);
  'instances': (_kvdirectory_v1_ViewInstance__Output)[];
  'streams': (_kvdirectory_v1_ViewStream__Output)[];
}
