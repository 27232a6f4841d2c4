// Original file: proto/kvdirectory.proto


export interface MovedClaim {
  'prompt_index'?: (number);
  'seq'?: (number);
}

export interface MovedClaim__Output {
  'prompt_index': (number);
  'seq': (number);
}
