// Original file: proto/kvdirectory.proto

import type { OutstandingPrefill as _kvdirectory_v1_OutstandingPrefill, OutstandingPrefill__Output as _kvdirectory_v1_OutstandingPrefill__Output } from '../../kvdirectory/v1/OutstandingPrefill.js';
import type { MovedClaim as _kvdirectory_v1_MovedClaim, MovedClaim__Output as _kvdirectory_v1_MovedClaim__Output } from '../../kvdirectory/v1/MovedClaim.js';

export interface InflightDecisions {
  'instance_name'?: (string);
  'count'?: (number);
  'age_ms'?: (number);
  'answered'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'withdrawn_seqs'?: (number)[];
  'prefill_tokens'?: (number)[];
  'outstanding_prefill'?: (_kvdirectory_v1_OutstandingPrefill | null);
  'moved_claims'?: (_kvdirectory_v1_MovedClaim)[];
  'open_claims'?: (number)[];
  'settled_seqs'?: (number)[];
}

export interface InflightDecisions__Output {
  'instance_name': (string);
  'count': (number);
  'age_ms': (number);
  'answered': (number);
  'prompts': (Buffer)[];
  'withdrawn_seqs': (number)[];
  'prefill_tokens': (number)[];
  'outstanding_prefill': (_kvdirectory_v1_OutstandingPrefill__Output | null);
  'moved_claims': (_kvdirectory_v1_MovedClaim__Output)[];
  'open_claims': (number)[];
  'settled_seqs': (number)[];
}
