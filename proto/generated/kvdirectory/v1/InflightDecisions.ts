// Original file: proto/kvdirectory.proto

import type { OutstandingPrefill as _kvdirectory_v1_OutstandingPrefill, OutstandingPrefill__Output as _kvdirectory_v1_OutstandingPrefill__Output } from '../../kvdirectory/v1/OutstandingPrefill.js';

export interface InflightDecisions {
  'instance_name'?: (string);
  'count'?: (number);
  'age_ms'?: (number);
  'answered'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'withdrawn_seqs'?: (number)[];
  'prefill_tokens'?: (number)[];
  'outstanding_prefill'?: (_kvdirectory_v1_OutstandingPrefill | null);
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
}
