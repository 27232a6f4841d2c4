// Original file: proto/kvdirectory.proto


export interface ListInstancesRequest {
}

export interface ListInstancesRequest__Output {
}
