// Original file: proto/kvdirectory.proto

import type { ViewInstance as _kvdirectory_v1_ViewInstance, ViewInstance__Output as _kvdirectory_v1_ViewInstance__Output } from '../../kvdirectory/v1/ViewInstance.js';

export interface ListInstancesResponse {
  'instances'?: (_kvdirectory_v1_ViewInstance)[];
  'etcd_connected'?: (boolean);
  'etcd_disabled'?: (boolean);
}

export interface ListInstancesResponse__Output {
  'instances': (_kvdirectory_v1_ViewInstance__Output)[];
  'etcd_connected': (boolean);
  'etcd_disabled': (boolean);
}
