// Original file: proto/kvdirectory.proto


export interface InflightShare {
  'router_id'?: (string);
  'count'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'prompt_seqs'?: (number)[];
}

export interface InflightShare__Output {
  'router_id': (string);
  'count': (number);
  'prompts': (Buffer)[];
  'prompt_seqs': (number)[];
}
