import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { GetStatsRequest as _kvdirectory_v1_GetStatsRequest, GetStatsRequest__Output as _kvdirectory_v1_GetStatsRequest__Output } from './kvdirectory/v1/GetStatsRequest.js';
import type { GetStatsResponse as _kvdirectory_v1_GetStatsResponse, GetStatsResponse__Output as _kvdirectory_v1_GetStatsResponse__Output } from './kvdirectory/v1/GetStatsResponse.js';
import type { InflightDecisions as _kvdirectory_v1_InflightDecisions, InflightDecisions__Output as _kvdirectory_v1_InflightDecisions__Output } from './kvdirectory/v1/InflightDecisions.js';
import type { InflightReport as _kvdirectory_v1_InflightReport, InflightReport__Output as _kvdirectory_v1_InflightReport__Output } from './kvdirectory/v1/InflightReport.js';
import type { InflightReportAck as _kvdirectory_v1_InflightReportAck, InflightReportAck__Output as _kvdirectory_v1_InflightReportAck__Output } from './kvdirectory/v1/InflightReportAck.js';
import type { InflightShare as _kvdirectory_v1_InflightShare, InflightShare__Output as _kvdirectory_v1_InflightShare__Output } from './kvdirectory/v1/InflightShare.js';
import type { KvDirectoryClient as _kvdirectory_v1_KvDirectoryClient, KvDirectoryDefinition as _kvdirectory_v1_KvDirectoryDefinition } from './kvdirectory/v1/KvDirectory.js';
import type { ListInstancesRequest as _kvdirectory_v1_ListInstancesRequest, ListInstancesRequest__Output as _kvdirectory_v1_ListInstancesRequest__Output } from './kvdirectory/v1/ListInstancesRequest.js';
import type { ListInstancesResponse as _kvdirectory_v1_ListInstancesResponse, ListInstancesResponse__Output as _kvdirectory_v1_ListInstancesResponse__Output } from './kvdirectory/v1/ListInstancesResponse.js';
import type { ListStreamsRequest as _kvdirectory_v1_ListStreamsRequest, ListStreamsRequest__Output as _kvdirectory_v1_ListStreamsRequest__Output } from './kvdirectory/v1/ListStreamsRequest.js';
import type { ListStreamsResponse as _kvdirectory_v1_ListStreamsResponse, ListStreamsResponse__Output as _kvdirectory_v1_ListStreamsResponse__Output } from './kvdirectory/v1/ListStreamsResponse.js';
import type { MovedClaim as _kvdirectory_v1_MovedClaim, MovedClaim__Output as _kvdirectory_v1_MovedClaim__Output } from './kvdirectory/v1/MovedClaim.js';
import type { OutstandingPrefill as _kvdirectory_v1_OutstandingPrefill, OutstandingPrefill__Output as _kvdirectory_v1_OutstandingPrefill__Output } from './kvdirectory/v1/OutstandingPrefill.js';
import type { ProfilePoint as _kvdirectory_v1_ProfilePoint, ProfilePoint__Output as _kvdirectory_v1_ProfilePoint__Output } from './kvdirectory/v1/ProfilePoint.js';
import type { QueryRequest as _kvdirectory_v1_QueryRequest, QueryRequest__Output as _kvdirectory_v1_QueryRequest__Output } from './kvdirectory/v1/QueryRequest.js';
import type { QueryResponse as _kvdirectory_v1_QueryResponse, QueryResponse__Output as _kvdirectory_v1_QueryResponse__Output } from './kvdirectory/v1/QueryResponse.js';
import type { ResidencyChanges as _kvdirectory_v1_ResidencyChanges, ResidencyChanges__Output as _kvdirectory_v1_ResidencyChanges__Output } from './kvdirectory/v1/ResidencyChanges.js';
import type { ServedModel as _kvdirectory_v1_ServedModel, ServedModel__Output as _kvdirectory_v1_ServedModel__Output } from './kvdirectory/v1/ServedModel.js';
import type { ServedModels as _kvdirectory_v1_ServedModels, ServedModels__Output as _kvdirectory_v1_ServedModels__Output } from './kvdirectory/v1/ServedModels.js';
import type { StreamCounters as _kvdirectory_v1_StreamCounters, StreamCounters__Output as _kvdirectory_v1_StreamCounters__Output } from './kvdirectory/v1/StreamCounters.js';
import type { StreamMatch as _kvdirectory_v1_StreamMatch, StreamMatch__Output as _kvdirectory_v1_StreamMatch__Output } from './kvdirectory/v1/StreamMatch.js';
import type { StreamStatus as _kvdirectory_v1_StreamStatus, StreamStatus__Output as _kvdirectory_v1_StreamStatus__Output } from './kvdirectory/v1/StreamStatus.js';
import type { ViewDelta as _kvdirectory_v1_ViewDelta, ViewDelta__Output as _kvdirectory_v1_ViewDelta__Output } from './kvdirectory/v1/ViewDelta.js';
import type { ViewHeartbeat as _kvdirectory_v1_ViewHeartbeat, ViewHeartbeat__Output as _kvdirectory_v1_ViewHeartbeat__Output } from './kvdirectory/v1/ViewHeartbeat.js';
import type { ViewInstance as _kvdirectory_v1_ViewInstance, ViewInstance__Output as _kvdirectory_v1_ViewInstance__Output } from './kvdirectory/v1/ViewInstance.js';
import type { ViewLoad as _kvdirectory_v1_ViewLoad, ViewLoad__Output as _kvdirectory_v1_ViewLoad__Output } from './kvdirectory/v1/ViewLoad.js';
import type { ViewSnapshot as _kvdirectory_v1_ViewSnapshot, ViewSnapshot__Output as _kvdirectory_v1_ViewSnapshot__Output } from './kvdirectory/v1/ViewSnapshot.js';
import type { ViewSnapshotChunk as _kvdirectory_v1_ViewSnapshotChunk, ViewSnapshotChunk__Output as _kvdirectory_v1_ViewSnapshotChunk__Output } from './kvdirectory/v1/ViewSnapshotChunk.js';
import type { ViewStream as _kvdirectory_v1_ViewStream, ViewStream__Output as _kvdirectory_v1_ViewStream__Output } from './kvdirectory/v1/ViewStream.js';
import type { ViewUpdate as _kvdirectory_v1_ViewUpdate, ViewUpdate__Output as _kvdirectory_v1_ViewUpdate__Output } from './kvdirectory/v1/ViewUpdate.js';
import type { WatchViewRequest as _kvdirectory_v1_WatchViewRequest, WatchViewRequest__Output as _kvdirectory_v1_WatchViewRequest__Output } from './kvdirectory/v1/WatchViewRequest.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  kvdirectory: {
    v1: {
      GetStatsRequest: MessageTypeDefinition<_kvdirectory_v1_GetStatsRequest, _kvdirectory_v1_GetStatsRequest__Output>
      GetStatsResponse: MessageTypeDefinition<_kvdirectory_v1_GetStatsResponse, _kvdirectory_v1_GetStatsResponse__Output>
      InflightDecisions: MessageTypeDefinition<_kvdirectory_v1_InflightDecisions, _kvdirectory_v1_InflightDecisions__Output>
      InflightReport: MessageTypeDefinition<_kvdirectory_v1_InflightReport, _kvdirectory_v1_InflightReport__Output>
      InflightReportAck: MessageTypeDefinition<_kvdirectory_v1_InflightReportAck, _kvdirectory_v1_InflightReportAck__Output>
      InflightShare: MessageTypeDefinition<_kvdirectory_v1_InflightShare, _kvdirectory_v1_InflightShare__Output>
      KvDirectory: SubtypeConstructor<typeof grpc.Client, _kvdirectory_v1_KvDirectoryClient> & { service: _kvdirectory_v1_KvDirectoryDefinition }
      ListInstancesRequest: MessageTypeDefinition<_kvdirectory_v1_ListInstancesRequest, _kvdirectory_v1_ListInstancesRequest__Output>
      ListInstancesResponse: MessageTypeDefinition<_kvdirectory_v1_ListInstancesResponse, _kvdirectory_v1_ListInstancesResponse__Output>
      ListStreamsRequest: MessageTypeDefinition<_kvdirectory_v1_ListStreamsRequest, _kvdirectory_v1_ListStreamsRequest__Output>
      ListStreamsResponse: MessageTypeDefinition<_kvdirectory_v1_ListStreamsResponse, _kvdirectory_v1_ListStreamsResponse__Output>
      MovedClaim: MessageTypeDefinition<_kvdirectory_v1_MovedClaim, _kvdirectory_v1_MovedClaim__Output>
      OutstandingPrefill: MessageTypeDefinition<_kvdirectory_v1_OutstandingPrefill, _kvdirectory_v1_OutstandingPrefill__Output>
      ProfilePoint: MessageTypeDefinition<_kvdirectory_v1_ProfilePoint, _kvdirectory_v1_ProfilePoint__Output>
      QueryRequest: MessageTypeDefinition<_kvdirectory_v1_QueryRequest, _kvdirectory_v1_QueryRequest__Output>
      QueryResponse: MessageTypeDefinition<_kvdirectory_v1_QueryResponse, _kvdirectory_v1_QueryResponse__Output>
      ResidencyChanges: MessageTypeDefinition<_kvdirectory_v1_ResidencyChanges, _kvdirectory_v1_ResidencyChanges__Output>
      ServedModel: MessageTypeDefinition<_kvdirectory_v1_ServedModel, _kvdirectory_v1_ServedModel__Output>
      ServedModels: MessageTypeDefinition<_kvdirectory_v1_ServedModels, _kvdirectory_v1_ServedModels__Output>
      StreamCounters: MessageTypeDefinition<_kvdirectory_v1_StreamCounters, _kvdirectory_v1_StreamCounters__Output>
      StreamMatch: MessageTypeDefinition<_kvdirectory_v1_StreamMatch, _kvdirectory_v1_StreamMatch__Output>
      StreamState: EnumTypeDefinition
      StreamStatus: MessageTypeDefinition<_kvdirectory_v1_StreamStatus, _kvdirectory_v1_StreamStatus__Output>
      ViewDelta: MessageTypeDefinition<_kvdirectory_v1_ViewDelta, _kvdirectory_v1_ViewDelta__Output>
      ViewHeartbeat: MessageTypeDefinition<_kvdirectory_v1_ViewHeartbeat, _kvdirectory_v1_ViewHeartbeat__Output>
      ViewInstance: MessageTypeDefinition<_kvdirectory_v1_ViewInstance, _kvdirectory_v1_ViewInstance__Output>
      ViewLoad: MessageTypeDefinition<_kvdirectory_v1_ViewLoad, _kvdirectory_v1_ViewLoad__Output>
      ViewSnapshot: MessageTypeDefinition<_kvdirectory_v1_ViewSnapshot, _kvdirectory_v1_ViewSnapshot__Output>
      ViewSnapshotChunk: MessageTypeDefinition<_kvdirectory_v1_ViewSnapshotChunk, _kvdirectory_v1_ViewSnapshotChunk__Output>
      ViewStream: MessageTypeDefinition<_kvdirectory_v1_ViewStream, _kvdirectory_v1_ViewStream__Output>
      ViewUpdate: MessageTypeDefinition<_kvdirectory_v1_ViewUpdate, _kvdirectory_v1_ViewUpdate__Output>
      WatchViewRequest: MessageTypeDefinition<_kvdirectory_v1_WatchViewRequest, _kvdirectory_v1_WatchViewRequest__Output>
    }
  }
}

