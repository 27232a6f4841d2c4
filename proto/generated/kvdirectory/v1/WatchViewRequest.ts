// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface WatchViewRequest {
  'router_id'?: (string);
  'epoch'?: (string);
  'version'?: (number | string | Long);
}

export interface WatchViewRequest__Output {
  'router_id': (string);
  'epoch': (string);
  'version': (string);
}
