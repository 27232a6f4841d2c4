// Original file: proto/kvdirectory.proto


export interface InflightDecisions {
  'instance_name'?: (string);
  'count'?: (number);
  'age_ms'?: (number);
  'answered'?: (number);
  'prompts'?: (Buffer | Uint8Array | string)[];
  'withdrawn_seqs'?: (number)[];
  'prefill_tokens'?: (number)[];
}

export interface InflightDecisions__Output {
  'instance_name': (string);
  'count': (number);
  'age_ms': (number);
  'answered': (number);
  'prompts': (Buffer)[];
  'withdrawn_seqs': (number)[];
  'prefill_tokens': (number)[];
}
