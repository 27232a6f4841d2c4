// Original file: proto/kvdirectory.proto

import type { OutstandingPrefill as _kvdirectory_v1_OutstandingPrefill, OutstandingPrefill__Output as _kvdirectory_v1_OutstandingPrefill__Output } from '../../kvdirectory/v1/OutstandingPrefill.js';
import type { Long } from '@grpc/proto-loader';

export interface InflightShare {
  'router_id'?: (string);
  'count'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'prompt_seqs'?: (number)[];
  'prefill_tokens'?: (number | string | Long);
  'prefill_token_decisions'?: (number);
  'outstanding_prefill'?: (_kvdirectory_v1_OutstandingPrefill | null);
  'open_claim_seqs'?: (number)[];
}

export interface InflightShare__Output {
  'router_id': (string);
  'count': (number);
  'prompts': (Buffer)[];
  'prompt_seqs': (number)[];
  'prefill_tokens': (string);
  'prefill_token_decisions': (number);
  'outstanding_prefill': (_kvdirectory_v1_OutstandingPrefill__Output | null);
  'open_claim_seqs': (number)[];
}
