// Original file: proto/kvdirectory.proto


export interface ListStreamsRequest {
}

export interface ListStreamsRequest__Output {
}
