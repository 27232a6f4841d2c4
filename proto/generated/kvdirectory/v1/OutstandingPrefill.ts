// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface OutstandingPrefill {
  'tokens'?: (number | string | Long);
  'requests'?: (number);
  'head_tokens'?: (number | string | Long);
  'head_age_ms'?: (number);
  'last_end_age_ms'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'prompt_tokens'?: (number)[];
}

export interface OutstandingPrefill__Output {
  'tokens': (string);
  'requests': (number);
  'head_tokens': (string);
  'head_age_ms': (number);
  'last_end_age_ms': (number);
  'prompts': (Buffer)[];
  'prompt_tokens': (number)[];
}
