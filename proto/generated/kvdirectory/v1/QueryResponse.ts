// Original file: proto/kvdirectory.proto

import type { StreamMatch as _kvdirectory_v1_StreamMatch, StreamMatch__Output as _kvdirectory_v1_StreamMatch__Output } from '../../kvdirectory/v1/StreamMatch.js';

export interface QueryResponse {
  'input_tokens'?: (number);
  'block_size'?: (number);
  'matches'?: (_kvdirectory_v1_StreamMatch)[];
}

export interface QueryResponse__Output {
  'input_tokens': (number);
  'block_size': (number);
  'matches': (_kvdirectory_v1_StreamMatch__Output)[];
}
