// Original file: proto/kvdirectory.proto


export interface InflightReportAck {
}

export interface InflightReportAck__Output {
}
