/** The gRPC edge of `ListInstances`: answers from the instance listing (view/instance-listing.ts). */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../shared/log/logger.js';
import type { WireListInstancesResponse } from '../../shared/view/view-wire.js';
import type { InstanceListing } from '../view/instance-listing.js';

export type InstanceListingApi = Pick<InstanceListing, 'listInstances'>;

export function listInstancesHandlers(listing: InstanceListingApi, log: Logger): grpc.UntypedServiceImplementation {
  const listInstances: grpc.handleUnaryCall<unknown, WireListInstancesResponse> = (_call, callback) => {
    let res: WireListInstancesResponse;
    try {
      res = listing.listInstances();
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      log.error({ rpc: 'ListInstances', err: detail }, 'gRPC handler failed');
      callback({ code: grpc.status.INTERNAL, details: `ListInstances: ${detail}` });
      return;
    }
    callback(null, res);
  };
  return { ListInstances: listInstances };
}
