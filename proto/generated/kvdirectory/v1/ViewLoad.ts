// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface ViewLoad {
  'waiting_requests_num'?: (number | string | Long);
  'gpu_cache_usage_perc'?: (number | string);
  'recent_max_ttft'?: (number | string);
  'recent_max_tbt'?: (number | string);
  'reported_at_ms'?: (number | string | Long);
}

export interface ViewLoad__Output {
  'waiting_requests_num': (string);
  'gpu_cache_usage_perc': (number);
  'recent_max_ttft': (number);
  'recent_max_tbt': (number);
  'reported_at_ms': (string);
}
