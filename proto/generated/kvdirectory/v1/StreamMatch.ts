// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface StreamMatch {
  'instance_name'?: (string);
  'dp_rank'?: (number);
  'synchronized'?: (boolean);
  'sequence'?: (number | string | Long);
  'device_hit_tokens'?: (number);
  'host_only_hit_tokens'?: (number);
  'reusable_prefix_tokens'?: (number);
  'device_blocks'?: (number);
  'host_blocks'?: (number);
  'error'?: (string);
  'engine_kind'?: (string);
}

export interface StreamMatch__Output {
  'instance_name': (string);
  'dp_rank': (number);
  'synchronized': (boolean);
  'sequence': (string);
  'device_hit_tokens': (number);
  'host_only_hit_tokens': (number);
  'reusable_prefix_tokens': (number);
  'device_blocks': (number);
  'host_blocks': (number);
  'error': (string);
  'engine_kind': (string);
}
