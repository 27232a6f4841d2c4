// Original file: proto/kvdirectory.proto

import type { StreamStatus as _kvdirectory_v1_StreamStatus, StreamStatus__Output as _kvdirectory_v1_StreamStatus__Output } from '../../kvdirectory/v1/StreamStatus.js';

export interface ListStreamsResponse {
  'streams'?: (_kvdirectory_v1_StreamStatus)[];
}

export interface ListStreamsResponse__Output {
  'streams': (_kvdirectory_v1_StreamStatus__Output)[];
}
