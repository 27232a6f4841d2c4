// Original file: proto/kvdirectory.proto


export interface InflightShare {
  'router_id'?: (string);
  'count'?: (number);
}

export interface InflightShare__Output {
  'router_id': (string);
  'count': (number);
}
