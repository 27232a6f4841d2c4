// Original file: proto/kvdirectory.proto

import type { ViewInstance as _kvdirectory_v1_ViewInstance, ViewInstance__Output as _kvdirectory_v1_ViewInstance__Output } from '../../kvdirectory/v1/ViewInstance.js';
import type { ViewStream as _kvdirectory_v1_ViewStream, ViewStream__Output as _kvdirectory_v1_ViewStream__Output } from '../../kvdirectory/v1/ViewStream.js';

export interface ViewSnapshot {
  'instances'?: (_kvdirectory_v1_ViewInstance)[];
  'streams'?: (_kvdirectory_v1_ViewStream)[];
}

export interface ViewSnapshot__Output {
  'instances': (_kvdirectory_v1_ViewInstance__Output)[];
  'streams': (_kvdirectory_v1_ViewStream__Output)[];
}
