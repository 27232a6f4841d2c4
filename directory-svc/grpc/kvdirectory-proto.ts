/**
 * The directory's gRPC edge loads kvdirectory.proto through the one shared loader (router-svc uses
 * the same module), so both sides decode with the same proto-loader options.
 */
export {
  KVDIRECTORY_LOADER_OPTIONS,
  KVDIRECTORY_PROTO_FILE,
  KVDIRECTORY_SERVICE_NAME,
  loadKvDirectoryPackage,
  protoDir,
} from '../../shared/view/kvdirectory-proto.js';
