// Original file: proto/kvdirectory.proto


export interface ViewHeartbeat {
}

export interface ViewHeartbeat__Output {
}
