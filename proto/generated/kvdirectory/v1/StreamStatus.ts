// Original file: proto/kvdirectory.proto

import type { StreamState as _kvdirectory_v1_StreamState, StreamState__Output as _kvdirectory_v1_StreamState__Output } from '../../kvdirectory/v1/StreamState.js';
import type { StreamCounters as _kvdirectory_v1_StreamCounters, StreamCounters__Output as _kvdirectory_v1_StreamCounters__Output } from '../../kvdirectory/v1/StreamCounters.js';
import type { Long } from '@grpc/proto-loader';

export interface StreamStatus {
  'instance_name'?: (string);
  'dp_rank'?: (number);
  'block_size'?: (number);
  'endpoint'?: (string);
  'replay_endpoint'?: (string);
  'topic'?: (string);
  'hash_seed'?: (number | string | Long);
  'state'?: (_kvdirectory_v1_StreamState);
  'synchronized'?: (boolean);
  'sequence'?: (number | string | Long);
  'error'?: (string);
  'device_blocks'?: (number | string | Long);
  'host_blocks'?: (number | string | Long);
  'entry_count'?: (number | string | Long);
  'counters'?: (_kvdirectory_v1_StreamCounters | null);
  'engine_kind'?: (string);
}

export interface StreamStatus__Output {
  'instance_name': (string);
  'dp_rank': (number);
  'block_size': (number);
  'endpoint': (string);
  'replay_endpoint': (string);
  'topic': (string);
  'hash_seed': (string);
  'state': (_kvdirectory_v1_StreamState__Output);
  'synchronized': (boolean);
  'sequence': (string);
  'error': (string);
  'device_blocks': (string);
  'host_blocks': (string);
  'entry_count': (string);
  'counters': (_kvdirectory_v1_StreamCounters__Output | null);
  'engine_kind': (string);
}
