// Original file: proto/kvdirectory.proto

import type { ViewInstance as _kvdirectory_v1_ViewInstance, ViewInstance__Output as _kvdirectory_v1_ViewInstance__Output } from '../../kvdirectory/v1/ViewInstance.js';
import type { ViewStream as _kvdirectory_v1_ViewStream, ViewStream__Output as _kvdirectory_v1_ViewStream__Output } from '../../kvdirectory/v1/ViewStream.js';
import type { ResidencyChanges as _kvdirectory_v1_ResidencyChanges, ResidencyChanges__Output as _kvdirectory_v1_ResidencyChanges__Output } from '../../kvdirectory/v1/ResidencyChanges.js';

export interface ViewDelta {
  'instance_removals'?: (string)[];
  'instance_upserts'?: (_kvdirectory_v1_ViewInstance)[];
  'stream_removals'?: (number)[];
  'stream_upserts'?: (_kvdirectory_v1_ViewStream)[];
  'stream_resets'?: (_kvdirectory_v1_ViewStream)[];
  'residency'?: (_kvdirectory_v1_ResidencyChanges)[];
}

export interface ViewDelta__Output {
  'instance_removals': (string)[];
  'instance_upserts': (_kvdirectory_v1_ViewInstance__Output)[];
  'stream_removals': (number)[];
  'stream_upserts': (_kvdirectory_v1_ViewStream__Output)[];
  'stream_resets': (_kvdirectory_v1_ViewStream__Output)[];
  'residency': (_kvdirectory_v1_ResidencyChanges__Output)[];
}
