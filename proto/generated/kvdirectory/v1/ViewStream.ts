// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface ViewStream {
  'stream_id'?: (number);
  'instance_name'?: (string);
  'dp_rank'?: (number);
  'block_size'?: (number);
  'hash_seed'?: (number | string | Long);
  'incarnation_id'?: (string);
  'generation'?: (number | string | Long);
  'synchronized'?: (boolean);
  'sequence'?: (number | string | Long);
  'error'?: (string);
  'device_blocks'?: (number | string | Long);
  'host_blocks'?: (number | string | Long);
  'keys'?: (Buffer | Uint8Array | string);
  'tiers'?: (Buffer | Uint8Array | string);
  'engine_kind'?: (string);
}

export interface ViewStream__Output {
  'stream_id': (number);
  'instance_name': (string);
  'dp_rank': (number);
  'block_size': (number);
  'hash_seed': (string);
  'incarnation_id': (string);
  'generation': (string);
  'synchronized': (boolean);
  'sequence': (string);
  'error': (string);
  'device_blocks': (string);
  'host_blocks': (string);
  'keys': (Buffer);
  'tiers': (Buffer);
  'engine_kind': (string);
}
