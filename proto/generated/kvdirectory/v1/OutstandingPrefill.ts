// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface OutstandingPrefill {
  'tokens'?: (number | string | Long);
  'requests'?: (number);
}

export interface OutstandingPrefill__Output {
  'tokens': (string);
  'requests': (number);
}
