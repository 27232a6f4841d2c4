// Original file: proto/kvdirectory.proto


export interface QueryRequest {
  'token_ids'?: (number)[];
}

export interface QueryRequest__Output {
  'token_ids': (number)[];
}
