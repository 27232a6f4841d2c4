/**
 * Loads `proto/kvdirectory.proto` (plus the standard health proto, so reflection describes both)
 * with the one set of proto-loader options the project uses. The .proto files are not copied
 * into dist/, so the proto directory is found by walking up from this module: the same code runs
 * from `shared/view/` under tsx and from `dist/shared/view/` after a build. Both services load the
 * proto through this one module (the directory serves it, the router watches the view with it).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath as healthProtoPath } from 'grpc-health-check';

export const KVDIRECTORY_PROTO_FILE = 'kvdirectory.proto';
export const KVDIRECTORY_SERVICE_NAME = 'kvdirectory.v1.KvDirectory';

/**
 * keepCase: wire names as in the .proto (routing.md JSON names); longs: String keeps int64/uint64
 * exact (kv-events §3.1); enums: String gives `"SYNCHRONIZED"`; defaults: zero values are present
 * on decoded messages, so `sequence: "0"` and `error: ""` are never missing.
 */
export const KVDIRECTORY_LOADER_OPTIONS: protoLoader.Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** Absolute path of the repository's `proto/` directory. */
export function protoDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, KVDIRECTORY_PROTO_FILE))) return candidate;
    const up = dirname(dir);
    if (up === dir) throw new Error(`proto/${KVDIRECTORY_PROTO_FILE} not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

let cached: protoLoader.PackageDefinition | null = null;

/** kvdirectory.v1 and grpc.health.v1 in one package definition (loaded once per process). */
export function loadKvDirectoryPackage(): protoLoader.PackageDefinition {
  if (cached === null) {
    cached = protoLoader.loadSync([join(protoDir(), KVDIRECTORY_PROTO_FILE), healthProtoPath], {
      ...KVDIRECTORY_LOADER_OPTIONS,
      includeDirs: [protoDir()],
    });
  }
  return cached;
}

/**
 * The generated KvDirectory client class (its `.service` is the server definition); throws when
 * the proto no longer declares the service.
 */
export function kvDirectoryServiceConstructor(): grpc.ServiceClientConstructor {
  const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage());
  const ns = (loaded['kvdirectory'] as grpc.GrpcObject | undefined)?.['v1'] as grpc.GrpcObject | undefined;
  const ctor = ns?.['KvDirectory'] as grpc.ServiceClientConstructor | undefined;
  if (ctor === undefined) throw new Error(`${KVDIRECTORY_SERVICE_NAME} missing from proto/${KVDIRECTORY_PROTO_FILE}`);
  return ctor;
}
