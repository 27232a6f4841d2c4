// Original file: proto/kvdirectory.proto


export interface ServedModel {
  'name'?: (string);
  'parent'?: (string);
}

export interface ServedModel__Output {
  'name': (string);
  'parent': (string);
}
