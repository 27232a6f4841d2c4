// Original file: proto/kvdirectory.proto


export interface QueryRequest {
  'token_ids'?: (number)[];
  'model'?: (string);
  'cache_salt'?: (string);
}

export interface QueryRequest__Output {
  'token_ids': (number)[];
  'model': (string);
  'cache_salt': (string);
}
