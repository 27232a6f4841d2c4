// Original file: proto/kvdirectory.proto

import type { InflightDecisions as _kvdirectory_v1_InflightDecisions, InflightDecisions__Output as _kvdirectory_v1_InflightDecisions__Output } from '../../kvdirectory/v1/InflightDecisions.js';

export interface InflightReport {
  'router_id'?: (string);
  'decisions'?: (_kvdirectory_v1_InflightDecisions)[];
}

export interface InflightReport__Output {
  'router_id': (string);
  'decisions': (_kvdirectory_v1_InflightDecisions__Output)[];
}
