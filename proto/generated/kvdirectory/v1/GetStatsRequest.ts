// Original file: proto/kvdirectory.proto


export interface GetStatsRequest {
}

export interface GetStatsRequest__Output {
}
