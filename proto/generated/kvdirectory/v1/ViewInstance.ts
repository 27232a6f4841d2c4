// Original file: proto/kvdirectory.proto

import type { ViewLoad as _kvdirectory_v1_ViewLoad, ViewLoad__Output as _kvdirectory_v1_ViewLoad__Output } from '../../kvdirectory/v1/ViewLoad.js';
import type { ProfilePoint as _kvdirectory_v1_ProfilePoint, ProfilePoint__Output as _kvdirectory_v1_ProfilePoint__Output } from '../../kvdirectory/v1/ProfilePoint.js';
import type { InflightShare as _kvdirectory_v1_InflightShare, InflightShare__Output as _kvdirectory_v1_InflightShare__Output } from '../../kvdirectory/v1/InflightShare.js';
import type { ServedModels as _kvdirectory_v1_ServedModels, ServedModels__Output as _kvdirectory_v1_ServedModels__Output } from '../../kvdirectory/v1/ServedModels.js';
import type { Long } from '@grpc/proto-loader';

export interface ViewInstance {
  'name'?: (string);
  'type'?: (string);
  'current_role'?: (string);
  'incarnation_id'?: (string);
  'register_ts_ms'?: (number | string | Long);
  'dp_size'?: (number);
  'state'?: (string);
  'schedulable'?: (boolean);
  'load'?: (_kvdirectory_v1_ViewLoad | null);
  'ttft_profiling_data'?: (_kvdirectory_v1_ProfilePoint)[];
  'tpot_profiling_data'?: (_kvdirectory_v1_ProfilePoint)[];
  'generation'?: (number | string | Long);
  'heartbeat_age_ms'?: (number | string | Long);
  'excluded_reason'?: (string);
  'backend_type'?: (string);
  'url'?: (string);
  'inflight'?: (_kvdirectory_v1_InflightShare)[];
  'models'?: (_kvdirectory_v1_ServedModels | null);
  'source'?: (string);
}

export interface ViewInstance__Output {
  'name': (string);
  'type': (string);
  'current_role': (string);
  'incarnation_id': (string);
  'register_ts_ms': (string);
  'dp_size': (number);
  'state': (string);
  'schedulable': (boolean);
  'load': (_kvdirectory_v1_ViewLoad__Output | null);
  'ttft_profiling_data': (_kvdirectory_v1_ProfilePoint__Output)[];
  'tpot_profiling_data': (_kvdirectory_v1_ProfilePoint__Output)[];
  'generation': (string);
  'heartbeat_age_ms': (string);
  'excluded_reason': (string);
  'backend_type': (string);
  'url': (string);
  'inflight': (_kvdirectory_v1_InflightShare__Output)[];
  'models': (_kvdirectory_v1_ServedModels__Output | null);
  'source': (string);
}
