// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface GetStatsResponse {
  'directory_enabled'?: (boolean);
  'stream_source'?: (string);
  'streams_total'?: (number);
  'streams_synchronized'?: (number);
  'streams_by_state'?: ({[key: string]: number});
  'device_blocks_total'?: (number | string | Long);
  'host_blocks_total'?: (number | string | Long);
  'entries_total'?: (number | string | Long);
  'queries_total'?: (number | string | Long);
  'started_at_ms'?: (number | string | Long);
  'uptime_ms'?: (number | string | Long);
  'view_epoch'?: (string);
  'view_version'?: (number | string | Long);
  'view_watchers'?: (number);
}

export interface GetStatsResponse__Output {
  'directory_enabled': (boolean);
  'stream_source': (string);
  'streams_total': (number);
  'streams_synchronized': (number);
  'streams_by_state': ({[key: string]: number});
  'device_blocks_total': (string);
  'host_blocks_total': (string);
  'entries_total': (string);
  'queries_total': (string);
  'started_at_ms': (string);
  'uptime_ms': (string);
  'view_epoch': (string);
  'view_version': (string);
  'view_watchers': (number);
}
