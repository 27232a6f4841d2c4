// Original file: proto/kvdirectory.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { GetStatsRequest as _kvdirectory_v1_GetStatsRequest, GetStatsRequest__Output as _kvdirectory_v1_GetStatsRequest__Output } from '../../kvdirectory/v1/GetStatsRequest.js';
import type { GetStatsResponse as _kvdirectory_v1_GetStatsResponse, GetStatsResponse__Output as _kvdirectory_v1_GetStatsResponse__Output } from '../../kvdirectory/v1/GetStatsResponse.js';
import type { InflightReport as _kvdirectory_v1_InflightReport, InflightReport__Output as _kvdirectory_v1_InflightReport__Output } from '../../kvdirectory/v1/InflightReport.js';
import type { InflightReportAck as _kvdirectory_v1_InflightReportAck, InflightReportAck__Output as _kvdirectory_v1_InflightReportAck__Output } from '../../kvdirectory/v1/InflightReportAck.js';
import type { ListInstancesRequest as _kvdirectory_v1_ListInstancesRequest, ListInstancesRequest__Output as _kvdirectory_v1_ListInstancesRequest__Output } from '../../kvdirectory/v1/ListInstancesRequest.js';
import type { ListInstancesResponse as _kvdirectory_v1_ListInstancesResponse, ListInstancesResponse__Output as _kvdirectory_v1_ListInstancesResponse__Output } from '../../kvdirectory/v1/ListInstancesResponse.js';
import type { ListStreamsRequest as _kvdirectory_v1_ListStreamsRequest, ListStreamsRequest__Output as _kvdirectory_v1_ListStreamsRequest__Output } from '../../kvdirectory/v1/ListStreamsRequest.js';
import type { ListStreamsResponse as _kvdirectory_v1_ListStreamsResponse, ListStreamsResponse__Output as _kvdirectory_v1_ListStreamsResponse__Output } from '../../kvdirectory/v1/ListStreamsResponse.js';
import type { QueryRequest as _kvdirectory_v1_QueryRequest, QueryRequest__Output as _kvdirectory_v1_QueryRequest__Output } from '../../kvdirectory/v1/QueryRequest.js';
import type { QueryResponse as _kvdirectory_v1_QueryResponse, QueryResponse__Output as _kvdirectory_v1_QueryResponse__Output } from '../../kvdirectory/v1/QueryResponse.js';
import type { ViewUpdate as _kvdirectory_v1_ViewUpdate, ViewUpdate__Output as _kvdirectory_v1_ViewUpdate__Output } from '../../kvdirectory/v1/ViewUpdate.js';
import type { WatchViewRequest as _kvdirectory_v1_WatchViewRequest, WatchViewRequest__Output as _kvdirectory_v1_WatchViewRequest__Output } from '../../kvdirectory/v1/WatchViewRequest.js';

export interface KvDirectoryClient extends grpc.Client {
  GetStats(argument: _kvdirectory_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _kvdirectory_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _kvdirectory_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _kvdirectory_v1_GetStatsRequest, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _kvdirectory_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _kvdirectory_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _kvdirectory_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _kvdirectory_v1_GetStatsRequest, callback: grpc.requestCallback<_kvdirectory_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  
  ListInstances(argument: _kvdirectory_v1_ListInstancesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  ListInstances(argument: _kvdirectory_v1_ListInstancesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  ListInstances(argument: _kvdirectory_v1_ListInstancesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  ListInstances(argument: _kvdirectory_v1_ListInstancesRequest, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  listInstances(argument: _kvdirectory_v1_ListInstancesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  listInstances(argument: _kvdirectory_v1_ListInstancesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  listInstances(argument: _kvdirectory_v1_ListInstancesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  listInstances(argument: _kvdirectory_v1_ListInstancesRequest, callback: grpc.requestCallback<_kvdirectory_v1_ListInstancesResponse__Output>): grpc.ClientUnaryCall;
  
  ListStreams(argument: _kvdirectory_v1_ListStreamsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  ListStreams(argument: _kvdirectory_v1_ListStreamsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  ListStreams(argument: _kvdirectory_v1_ListStreamsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  ListStreams(argument: _kvdirectory_v1_ListStreamsRequest, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  listStreams(argument: _kvdirectory_v1_ListStreamsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  listStreams(argument: _kvdirectory_v1_ListStreamsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  listStreams(argument: _kvdirectory_v1_ListStreamsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  listStreams(argument: _kvdirectory_v1_ListStreamsRequest, callback: grpc.requestCallback<_kvdirectory_v1_ListStreamsResponse__Output>): grpc.ClientUnaryCall;
  
  Query(argument: _kvdirectory_v1_QueryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  Query(argument: _kvdirectory_v1_QueryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  Query(argument: _kvdirectory_v1_QueryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  Query(argument: _kvdirectory_v1_QueryRequest, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  query(argument: _kvdirectory_v1_QueryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  query(argument: _kvdirectory_v1_QueryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  query(argument: _kvdirectory_v1_QueryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  query(argument: _kvdirectory_v1_QueryRequest, callback: grpc.requestCallback<_kvdirectory_v1_QueryResponse__Output>): grpc.ClientUnaryCall;
  
  ReportInflight(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  ReportInflight(metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  ReportInflight(options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  ReportInflight(callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  reportInflight(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  reportInflight(metadata: grpc.Metadata, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  reportInflight(options: grpc.CallOptions, callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  reportInflight(callback: grpc.requestCallback<_kvdirectory_v1_InflightReportAck__Output>): grpc.ClientWritableStream<_kvdirectory_v1_InflightReport>;
  
  WatchView(argument: _kvdirectory_v1_WatchViewRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_kvdirectory_v1_ViewUpdate__Output>;
  WatchView(argument: _kvdirectory_v1_WatchViewRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_kvdirectory_v1_ViewUpdate__Output>;
  watchView(argument: _kvdirectory_v1_WatchViewRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_kvdirectory_v1_ViewUpdate__Output>;
  watchView(argument: _kvdirectory_v1_WatchViewRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_kvdirectory_v1_ViewUpdate__Output>;
  
}

export interface KvDirectoryHandlers extends grpc.UntypedServiceImplementation {
  GetStats: grpc.handleUnaryCall<_kvdirectory_v1_GetStatsRequest__Output, _kvdirectory_v1_GetStatsResponse>;
  
  ListInstances: grpc.handleUnaryCall<_kvdirectory_v1_ListInstancesRequest__Output, _kvdirectory_v1_ListInstancesResponse>;
  
  ListStreams: grpc.handleUnaryCall<_kvdirectory_v1_ListStreamsRequest__Output, _kvdirectory_v1_ListStreamsResponse>;
  
  Query: grpc.handleUnaryCall<_kvdirectory_v1_QueryRequest__Output, _kvdirectory_v1_QueryResponse>;
  
  ReportInflight: grpc.handleClientStreamingCall<_kvdirectory_v1_InflightReport__Output, _kvdirectory_v1_InflightReportAck>;
  
  WatchView: grpc.handleServerStreamingCall<_kvdirectory_v1_WatchViewRequest__Output, _kvdirectory_v1_ViewUpdate>;
  
}

export interface KvDirectoryDefinition extends grpc.ServiceDefinition {
  GetStats: MethodDefinition<_kvdirectory_v1_GetStatsRequest, _kvdirectory_v1_GetStatsResponse, _kvdirectory_v1_GetStatsRequest__Output, _kvdirectory_v1_GetStatsResponse__Output>
  ListInstances: MethodDefinition<_kvdirectory_v1_ListInstancesRequest, _kvdirectory_v1_ListInstancesResponse, _kvdirectory_v1_ListInstancesRequest__Output, _kvdirectory_v1_ListInstancesResponse__Output>
  ListStreams: MethodDefinition<_kvdirectory_v1_ListStreamsRequest, _kvdirectory_v1_ListStreamsResponse, _kvdirectory_v1_ListStreamsRequest__Output, _kvdirectory_v1_ListStreamsResponse__Output>
  Query: MethodDefinition<_kvdirectory_v1_QueryRequest, _kvdirectory_v1_QueryResponse, _kvdirectory_v1_QueryRequest__Output, _kvdirectory_v1_QueryResponse__Output>
  ReportInflight: MethodDefinition<_kvdirectory_v1_InflightReport, _kvdirectory_v1_InflightReportAck, _kvdirectory_v1_InflightReport__Output, _kvdirectory_v1_InflightReportAck__Output>
  WatchView: MethodDefinition<_kvdirectory_v1_WatchViewRequest, _kvdirectory_v1_ViewUpdate, _kvdirectory_v1_WatchViewRequest__Output, _kvdirectory_v1_ViewUpdate__Output>
}
