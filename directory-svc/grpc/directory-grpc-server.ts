/**
 * The directory's gRPC edge (architecture.md "The view stream (proto/)"): KvDirectory (Query,
 * ListStreams, GetStats), the standard health service (SERVING once bound) and reflection, so
 * `grpcurl -plaintext host:port list` works. Input is validated here; grpc-js errors are turned
 * into `GrpcServeError` here and nowhere else. With `--internal_api_token` every KvDirectory RPC
 * needs the `x-internal-token` metadata (health and reflection stay open); `--grpc_tls_*` add TLS.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { ReflectionService } from '@grpc/reflection';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import { requireInternalToken } from '../../shared/security/grpc-token-auth.js';
import { serverCredentials, type GrpcServerTls } from '../../shared/security/grpc-tls.js';
import { InternalTokenCheck } from '../../shared/security/internal-token.js';
import { DomainError } from '../../shared/errors/domain-error.js';
import { firstInvalidTokenId } from '../../shared/keys/token-ids.js';
import type { QueryResult } from '../../shared/view/query-result.js';
import { KeyIdentityCache } from '../../shared/keys/cache-identity.js';
import { modelNotFoundMessage, type ListedInstance } from '../../shared/view/model-scope.js';
import type { DirectoryStats, StreamStatus } from '../directory.js';
import type { QueryScope } from '../index/stream-query.js';
import { queryIdentity } from './query-identity.js';
import { KVDIRECTORY_SERVICE_NAME, loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import {
  toWireQueryResponse,
  toWireStats,
  toWireStreamStatus,
  type WireGetStatsResponse,
  type WireListStreamsResponse,
  type WireQueryRequest,
  type WireQueryResponse,
} from './kvdirectory-wire.js';
import { inflightHandlers, type InflightApi } from './inflight-handler.js';
import { listInstancesHandlers, type InstanceListingApi } from './list-instances-handler.js';
import { preEncodedWatchView, viewHandlers, viewStatsFields, type ViewApi } from './view-handlers.js';

/** What the gRPC edge reads; `Directory` implements it. */
export interface DirectoryApi {
  query(tokenIds: ArrayLike<number>, scope?: QueryScope | null): QueryResult;
  listStreams(): StreamStatus[];
  stats(): DirectoryStats;
}

export interface DirectoryGrpcServerOptions {
  /** `--grpc_port`; 0 binds an ephemeral port (tests), reported by `port`. */
  readonly port: number;
  /** Default 0.0.0.0: routers on other hosts connect here. */
  readonly host?: string;
  readonly directory: DirectoryApi;
  /** WatchView (the view publisher); without it the RPC answers UNIMPLEMENTED. */
  readonly view?: ViewApi;
  /** ListInstances (the instance listing); without it the RPC answers UNIMPLEMENTED. */
  readonly instances?: InstanceListingApi;
  /** ReportInflight (routing.md "In-flight load"); without it the RPC answers UNIMPLEMENTED. */
  readonly inflight?: InflightApi;
  /**
   * The instances' served-model lists (cache-identity §1) that Query's `model` is resolved
   * against; absent: every instance's list is unknown.
   */
  readonly servedModels?: () => Iterable<ListedInstance>;
  readonly logger?: Logger;
  /** `--internal_api_token`: required as `x-internal-token` metadata on every KvDirectory RPC; '' or absent = open. */
  readonly internalApiToken?: string;
  /** `--grpc_tls_*`; absent or null = plaintext. */
  readonly tls?: GrpcServerTls | null;
}

/** The server could not bind or serve; `class` is stable. */
export class GrpcServeError extends DomainError {
  readonly class = 'grpc_bind' as const;
}


export class DirectoryGrpcServer {
  private constructor(
    private readonly server: grpc.Server,
    private readonly health: HealthImplementation,
    /** The bound port (the ephemeral one when asked for 0). */
    readonly port: number,
    private readonly log: Logger,
  ) {}

  /** Binds, starts serving and marks health SERVING; throws `GrpcServeError` when binding fails. */
  static async start(opts: DirectoryGrpcServerOptions): Promise<DirectoryGrpcServer> {
    const log = opts.logger ?? silentLogger;
    const pkg = loadKvDirectoryPackage();
    const loaded = grpc.loadPackageDefinition(pkg);
    const service = serviceDefinition(loaded);
    const server = new grpc.Server();
    const view = opts.view === undefined ? {} : viewHandlers(opts.view, log);
    const inflight = opts.inflight === undefined ? {} : inflightHandlers(opts.inflight, log);
    const instances = opts.instances === undefined ? {} : listInstancesHandlers(opts.instances, log);
    const kvDirectory = preEncodedWatchView(service);
    // One guard over the whole service; health and reflection below stay open for probes.
    const token = new InternalTokenCheck(opts.internalApiToken ?? '');
    server.addService(kvDirectory, requireInternalToken(kvDirectory, { ...handlers(opts.directory, log, opts.view, opts.servedModels), ...view, ...instances, ...inflight }, token, log));
    const health = new HealthImplementation({ '': 'NOT_SERVING', [KVDIRECTORY_SERVICE_NAME]: 'NOT_SERVING' });
    health.addToServer(server);
    new ReflectionService(pkg).addToServer(server);
    const host = opts.host ?? '0.0.0.0';
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(`${host}:${opts.port}`, serverCredentials(opts.tls ?? null), (err, bound) => {
        if (err) reject(new GrpcServeError(`cannot bind ${host}:${opts.port}: ${err.message}`));
        else resolve(bound);
      });
    });
    health.setStatus('', 'SERVING');
    health.setStatus(KVDIRECTORY_SERVICE_NAME, 'SERVING');
    log.info({ port, tls: opts.tls ? (opts.tls.ca !== null ? 'mutual' : 'server') : 'off', token_required: token.required }, 'gRPC serving');
    return new DirectoryGrpcServer(server, health, port, log);
  }

  /**
   * Health NOT_SERVING, then a graceful shutdown; calls still running after `graceMs` are
   * cancelled so a stop never hangs.
   */
  async close(graceMs = 2000): Promise<void> {
    this.health.setStatus('', 'NOT_SERVING');
    this.health.setStatus(KVDIRECTORY_SERVICE_NAME, 'NOT_SERVING');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    this.log.info('gRPC stopped');
  }
}

function serviceDefinition(loaded: grpc.GrpcObject): grpc.ServiceDefinition {
  const ns = (loaded['kvdirectory'] as grpc.GrpcObject | undefined)?.['v1'] as grpc.GrpcObject | undefined;
  const ctor = ns?.['KvDirectory'] as grpc.ServiceClientConstructor | undefined;
  if (ctor === undefined) throw new GrpcServeError(`${KVDIRECTORY_SERVICE_NAME} missing from proto/kvdirectory.proto`);
  return ctor.service;
}

/** The first token id outside [0, 2^31), as an INVALID_ARGUMENT detail naming the field; null when all are fine. */
export function checkTokenIds(tokenIds: unknown): string | null {
  if (!Array.isArray(tokenIds)) return 'token_ids: expected a list of integers in [0, 2^31)';
  const i = firstInvalidTokenId(tokenIds);
  return i < 0 ? null : `token_ids[${i}]: expected an integer in [0, 2^31), got ${String(tokenIds[i])}`;
}

const NO_INSTANCES: readonly ListedInstance[] = [];

function handlers(directory: DirectoryApi, log: Logger, view?: ViewApi, servedModels?: () => Iterable<ListedInstance>): grpc.UntypedServiceImplementation {
  // Identities are few (models × salts in use); one allocation per new one, none per query.
  const identities = new KeyIdentityCache();
  const query: grpc.handleUnaryCall<WireQueryRequest, WireQueryResponse> = (call, callback) => {
    const req = call.request;
    const bad = checkTokenIds(req.token_ids);
    if (bad !== null) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: bad });
      return;
    }
    const id = queryIdentity(req.model, req.cache_salt, servedModels?.() ?? NO_INSTANCES, identities);
    if (!id.ok) {
      callback({ code: grpc.status.INVALID_ARGUMENT, details: `${id.field}: ${id.reason}` });
      return;
    }
    respond(log, 'Query', callback, () => {
      const result = directory.query(req.token_ids, id.scope);
      // cache-identity §2: a model no instance lists while every list is known does not exist
      // (only an instance outside the lists could have been in scope, and none has a stream).
      if (id.model !== null && !id.model.listed && result.matches.length === 0) throw new StatusAnswer(grpc.status.NOT_FOUND, modelNotFoundMessage(id.model.model));
      return toWireQueryResponse(result);
    });
  };
  const listStreams: grpc.handleUnaryCall<unknown, WireListStreamsResponse> = (_call, callback) => {
    respond(log, 'ListStreams', callback, () => ({ streams: directory.listStreams().map(toWireStreamStatus) }));
  };
  const getStats: grpc.handleUnaryCall<unknown, WireGetStatsResponse> = (_call, callback) => {
    respond(log, 'GetStats', callback, () => (view === undefined ? toWireStats(directory.stats()) : { ...toWireStats(directory.stats()), ...viewStatsFields(view) }));
  };
  return { Query: query, ListStreams: listStreams, GetStats: getStats };
}

/** A handler body's answer with a status of its own (NOT_FOUND, ...), not a failure. */
class StatusAnswer extends DomainError {
  readonly class = 'status' as const;
  constructor(readonly code: grpc.status, detail: string) {
    super(detail);
  }
}

/**
 * Runs one handler body; a `StatusAnswer` answers its status, an unexpected throw answers
 * INTERNAL and is logged, never crashes the process.
 */
function respond<T>(log: Logger, rpc: string, callback: grpc.sendUnaryData<T>, body: () => T): void {
  let result: T;
  try {
    result = body();
  } catch (e) {
    if (e instanceof StatusAnswer) {
      callback({ code: e.code, details: e.detail });
      return;
    }
    const detail = e instanceof Error ? e.message : String(e);
    log.error({ rpc, err: detail }, 'gRPC handler failed');
    callback({ code: grpc.status.INTERNAL, details: `${rpc}: ${detail}` });
    return;
  }
  callback(null, result);
}
