/**
 * kvctl's gRPC edge: unary calls to `kvdirectory.v1.KvDirectory`, loaded through the one shared
 * proto loader (shared/view/kvdirectory-proto.ts) so kvctl decodes exactly as the services do
 * (wire names, 64-bit integers as decimal strings). grpc-js errors become `KvctlRpcError` here
 * and nowhere else; an address that is UNAVAILABLE is skipped for the next one in the list.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import * as grpc from '@grpc/grpc-js';
import type { HostPort } from '../../shared/config/flags.js';
import { channelCredentials, type GrpcClientTls } from '../../shared/security/grpc-tls.js';
import { KVDIRECTORY_SERVICE_NAME, loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import type { WireListInstancesResponse } from '../../shared/view/view-wire.js';
import type { WireGetStatsResponse, WireListStreamsResponse, WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';

export type KvDirectoryRpc = 'ListStreams' | 'ListInstances' | 'Query' | 'GetStats';

/** A call failed; `code` is the grpc status name (`UNAVAILABLE`, `UNIMPLEMENTED`, ...). */
export class KvctlRpcError extends DomainError {
  readonly class = 'rpc' as const;
  constructor(
    readonly rpc: KvDirectoryRpc,
    readonly code: string,
    readonly address: string,
    detail: string,
  ) {
    super(detail);
  }

  /** kvctl's stderr line names the call rather than the class. */
  protected override formatMessage(): string {
    return `${this.rpc} on ${this.address}: ${this.code}: ${this.detail}`;
  }
}

type UnaryMethod = (req: unknown, meta: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

export interface DirectoryClientOptions {
  readonly addresses: readonly HostPort[];
  /** '' sends no `x-internal-token`. */
  readonly internalApiToken: string;
  /** `--grpc_tls_*` contents; absent or null = plaintext. */
  readonly tls?: GrpcClientTls | null;
  readonly timeoutMs: number;
}

function statusName(code: number): string {
  return grpc.status[code] ?? `status ${code}`;
}

export class DirectoryClient {
  private readonly clients: { address: string; client: grpc.Client }[];

  constructor(private readonly opts: DirectoryClientOptions) {
    const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage());
    const ns = (loaded['kvdirectory'] as grpc.GrpcObject | undefined)?.['v1'] as grpc.GrpcObject | undefined;
    const Ctor = ns?.['KvDirectory'] as grpc.ServiceClientConstructor | undefined;
    if (Ctor === undefined) throw new Error(`${KVDIRECTORY_SERVICE_NAME} missing from proto/kvdirectory.proto`);
    const creds = channelCredentials(opts.tls ?? null);
    this.clients = opts.addresses.map((a) => {
      const address = `${a.host}:${a.port}`;
      return { address, client: new Ctor(address, creds) };
    });
  }

  listStreams(): Promise<WireListStreamsResponse> {
    return this.call('ListStreams', {}) as Promise<WireListStreamsResponse>;
  }

  listInstances(): Promise<WireListInstancesResponse> {
    return this.call('ListInstances', {}) as Promise<WireListInstancesResponse>;
  }

  /** `model` / `cacheSalt` '' = not given (cache-identity §2). */
  query(tokenIds: readonly number[], model = '', cacheSalt = ''): Promise<WireQueryResponse> {
    return this.call('Query', { token_ids: tokenIds, model, cache_salt: cacheSalt }) as Promise<WireQueryResponse>;
  }

  getStats(): Promise<WireGetStatsResponse> {
    return this.call('GetStats', {}) as Promise<WireGetStatsResponse>;
  }

  close(): void {
    for (const c of this.clients) c.client.close();
  }

  /** Tries each address in order while the previous one is UNAVAILABLE; the last error wins. */
  private async call(rpc: KvDirectoryRpc, request: object): Promise<unknown> {
    let last: KvctlRpcError | null = null;
    for (const { address, client } of this.clients) {
      try {
        return await this.callOne(rpc, address, client, request);
      } catch (e) {
        if (!(e instanceof KvctlRpcError) || e.code !== 'UNAVAILABLE') throw e;
        last = e;
      }
    }
    throw last ?? new KvctlRpcError(rpc, 'UNAVAILABLE', '', 'no directory address');
  }

  private callOne(rpc: KvDirectoryRpc, address: string, client: grpc.Client, request: object): Promise<unknown> {
    const meta = new grpc.Metadata();
    if (this.opts.internalApiToken !== '') meta.set('x-internal-token', this.opts.internalApiToken);
    // The generated client's methods are not in grpc.Client's type; looked up by the proto's name.
    const method = (client as unknown as Record<string, UnaryMethod>)[rpc];
    if (method === undefined) return Promise.reject(new KvctlRpcError(rpc, 'UNIMPLEMENTED', address, `${rpc} missing from proto/kvdirectory.proto`));
    return new Promise((resolve, reject) => {
      method.call(client, request, meta, { deadline: Date.now() + this.opts.timeoutMs }, (err, res) => {
        // One line: a TLS failure's detail carries OpenSSL's multi-line reason.
        if (err) reject(new KvctlRpcError(rpc, statusName(err.code), address, (err.details || err.message).replace(/\s*Resolution note:\s*$/, '').replace(/\s+/g, ' ').trim()));
        else resolve(res);
      });
    });
  }
}
