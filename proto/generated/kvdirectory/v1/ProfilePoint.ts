// Original file: proto/kvdirectory.proto


export interface ProfilePoint {
  'values'?: (number | string)[];
}

export interface ProfilePoint__Output {
  'values': (number)[];
}
