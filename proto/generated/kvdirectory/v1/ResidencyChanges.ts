// Original file: proto/kvdirectory.proto


export interface ResidencyChanges {
  'stream_id'?: (number);
  'keys'?: (Buffer | Uint8Array | string);
  'tiers'?: (Buffer | Uint8Array | string);
}

export interface ResidencyChanges__Output {
  'stream_id': (number);
  'keys': (Buffer);
  'tiers': (Buffer);
}
