// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface InflightShare {
  'router_id'?: (string);
  'count'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'prompt_seqs'?: (number)[];
  'prefill_tokens'?: (number | string | Long);
  'prefill_token_decisions'?: (number);
}

export interface InflightShare__Output {
  'router_id': (string);
  'count': (number);
  'prompts': (Buffer)[];
  'prompt_seqs': (number)[];
  'prefill_tokens': (string);
  'prefill_token_decisions': (number);
}
