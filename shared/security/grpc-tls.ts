/**
 * gRPC transport credentials between the directory and its clients (router view client, kvctl).
 * Without TLS material both sides stay plaintext (local dev, the default); the PEM bytes come from
 * `tls-files.ts`, read and checked once at startup.
 */
import * as grpc from '@grpc/grpc-js';

/** The directory's `--grpc_tls_cert` / `--grpc_tls_key` / `--grpc_tls_ca` contents. */
export interface GrpcServerTls {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** Set: clients must present a certificate signed by it (mutual TLS). */
  readonly ca: Buffer | null;
}

/** A client's `--grpc_tls_ca` (verifies the directory) and optional certificate for mutual TLS. */
export interface GrpcClientTls {
  readonly ca: Buffer;
  /** Both set or both null. */
  readonly cert: Buffer | null;
  readonly key: Buffer | null;
}

export function serverCredentials(tls: GrpcServerTls | null): grpc.ServerCredentials {
  if (tls === null) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], tls.ca !== null);
}

export function channelCredentials(tls: GrpcClientTls | null): grpc.ChannelCredentials {
  if (tls === null) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(tls.ca, tls.key, tls.cert);
}
