/**
 * A plaintext KvDirectory gRPC client on 127.0.0.1 for the view-stream suites. Snapshots and resets
 * carry whole residencies, so the 4 MiB default receive limit is lifted.
 */
import * as grpc from '@grpc/grpc-js';
import { loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';

/** `C` names the methods the caller uses (WatchView, ListInstances, …); close it with `close()`. */
export function connectKvDirectory<C extends grpc.Client>(port: number): C {
  const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as { kvdirectory: { v1: { KvDirectory: grpc.ServiceClientConstructor } } };
  return new loaded.kvdirectory.v1.KvDirectory(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  }) as unknown as C;
}
