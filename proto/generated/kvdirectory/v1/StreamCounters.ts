// Original file: proto/kvdirectory.proto

import type { Long } from '@grpc/proto-loader';

export interface StreamCounters {
  'batches_applied'?: (number | string | Long);
  'topic_mismatch'?: (number | string | Long);
  'skipped_out_of_scope'?: (number | string | Long);
  'skipped_descendant'?: (number | string | Long);
  'skipped_orphan'?: (number | string | Long);
  'sync_lost'?: ({[key: string]: number | string | Long});
  'recoveries_ok'?: (number | string | Long);
  'recoveries_failed'?: (number | string | Long);
  'restores'?: (number | string | Long);
  'silent_loss'?: (number | string | Long);
  'reconcile_failures'?: (number | string | Long);
  'skipped_medium'?: (number | string | Long);
  'skipped_multimodal'?: (number | string | Long);
  'skipped_group'?: (number | string | Long);
}

export interface StreamCounters__Output {
  'batches_applied': (string);
  'topic_mismatch': (string);
  'skipped_out_of_scope': (string);
  'skipped_descendant': (string);
  'skipped_orphan': (string);
  'sync_lost': ({[key: string]: string});
  'recoveries_ok': (string);
  'recoveries_failed': (string);
  'restores': (string);
  'silent_loss': (string);
  'reconcile_failures': (string);
  'skipped_medium': (string);
  'skipped_multimodal': (string);
  'skipped_group': (string);
}
