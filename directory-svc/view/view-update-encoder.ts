/**
 * Encodes a `ViewUpdate` once into its protobuf bytes, so every watcher is sent the same buffer
 * and the change log holds exact byte sizes (architecture.md "The view stream": bounded log).
 * Uses the serializer proto-loader builds for `WatchView` from proto/kvdirectory.proto, the same
 * one grpc-js would call per write.
 */
import { KVDIRECTORY_SERVICE_NAME, loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import type { WireViewUpdate } from './view-wire.js';

export type ViewUpdateEncoder = (update: WireViewUpdate) => Buffer;
export type ViewUpdateDecoder = (bytes: Buffer) => unknown;

interface MethodCodec {
  responseSerialize: (value: unknown) => Buffer;
  responseDeserialize: (bytes: Buffer) => unknown;
}

function watchViewCodec(): MethodCodec {
  const service = loadKvDirectoryPackage()[KVDIRECTORY_SERVICE_NAME] as unknown as Record<string, MethodCodec | undefined> | undefined;
  const method = service?.['WatchView'];
  if (method === undefined) throw new Error(`${KVDIRECTORY_SERVICE_NAME}.WatchView missing from proto/kvdirectory.proto`);
  return method;
}

/** The protobuf encoder of `kvdirectory.v1.ViewUpdate`. */
export function protoViewUpdateEncoder(): ViewUpdateEncoder {
  const codec = watchViewCodec();
  return (update) => codec.responseSerialize(update);
}

/** The matching decoder (tests, benchmarks): proto-loader options of the project (strings for 64-bit). */
export function protoViewUpdateDecoder(): ViewUpdateDecoder {
  const codec = watchViewCodec();
  return (bytes) => codec.responseDeserialize(bytes);
}
