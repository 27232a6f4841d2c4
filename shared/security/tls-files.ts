/**
 * The `--grpc_tls_*` flags turned into PEM bytes at startup (architecture.md "Processes and
 * flags": bad input is one line naming the flag, exit 2). Pairs are checked before any file is
 * read; each file must be readable, and the set is loaded into a TLS context once, so a malformed
 * PEM or a key that does not match its certificate is refused here rather than at the first
 * handshake. Throws `ConfigError`.
 */
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../config/config-error.js';
import type { GrpcClientTls, GrpcServerTls } from './grpc-tls.js';

/** The three flag values as parsed ('' = not given). */
export interface TlsFlagValues {
  readonly grpcTlsCert: string;
  readonly grpcTlsKey: string;
  readonly grpcTlsCa: string;
}

/**
 * directory-svc: null (plaintext) when none is given; cert and key together; `--grpc_tls_ca`
 * (client certificates required) only with them.
 */
export function readServerTls(f: TlsFlagValues): GrpcServerTls | null {
  if (f.grpcTlsCert === '' && f.grpcTlsKey === '' && f.grpcTlsCa === '') return null;
  checkPair(f);
  if (f.grpcTlsCert === '') {
    throw invalid('--grpc_tls_ca', 'requiring client certificates needs --grpc_tls_cert and --grpc_tls_key too');
  }
  const cert = readPem('--grpc_tls_cert', f.grpcTlsCert);
  const key = readPem('--grpc_tls_key', f.grpcTlsKey);
  const ca = f.grpcTlsCa === '' ? null : readPem('--grpc_tls_ca', f.grpcTlsCa);
  checkLoads(cert, key, ca);
  return { cert, key, ca };
}

/**
 * router-svc and kvctl: null (plaintext) when none is given; `--grpc_tls_ca` verifies the
 * directory; cert and key (mutual TLS) together and only with it.
 */
export function readClientTls(f: TlsFlagValues): GrpcClientTls | null {
  if (f.grpcTlsCert === '' && f.grpcTlsKey === '' && f.grpcTlsCa === '') return null;
  checkPair(f);
  if (f.grpcTlsCa === '') {
    throw invalid('--grpc_tls_cert', 'a client certificate needs --grpc_tls_ca to verify the directory');
  }
  const ca = readPem('--grpc_tls_ca', f.grpcTlsCa);
  const cert = f.grpcTlsCert === '' ? null : readPem('--grpc_tls_cert', f.grpcTlsCert);
  const key = f.grpcTlsKey === '' ? null : readPem('--grpc_tls_key', f.grpcTlsKey);
  checkLoads(cert, key, ca);
  return { ca, cert, key };
}

function checkPair(f: TlsFlagValues): void {
  if (f.grpcTlsCert !== '' && f.grpcTlsKey === '') throw invalid('--grpc_tls_key', 'required with --grpc_tls_cert');
  if (f.grpcTlsKey !== '' && f.grpcTlsCert === '') throw invalid('--grpc_tls_cert', 'required with --grpc_tls_key');
}

function readPem(flag: string, path: string): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));
    throw invalid(flag, `cannot read ${path} (${code})`);
  }
  if (!bytes.includes('-----BEGIN ')) throw invalid(flag, `${path} is not a PEM file`);
  return bytes;
}

/** One TLS context built from the set: the flag named is the first part OpenSSL refuses. */
function checkLoads(cert: Buffer | null, key: Buffer | null, ca: Buffer | null): void {
  if (ca !== null) tryContext('--grpc_tls_ca', () => createSecureContext({ ca }));
  if (cert !== null && key !== null) {
    tryContext('--grpc_tls_cert', () => createSecureContext({ cert }));
    tryContext('--grpc_tls_key', () => createSecureContext({ cert, key }));
  }
}

function tryContext(flag: string, build: () => unknown): void {
  try {
    build();
  } catch (e) {
    // OpenSSL's reason ("key values mismatch", "no start line") without the library's stack.
    throw invalid(flag, e instanceof Error ? e.message.split('\n')[0]! : String(e));
  }
}

function invalid(flag: string, reason: string): ConfigError {
  return new ConfigError(flag, reason, `invalid ${flag}: ${reason}`);
}
