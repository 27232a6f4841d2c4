/**
 * The view cache's failures (architecture.md "The view stream"), one class per cause with a stable
 * `class`; the message is `<class>: <detail>`. grpc-js errors become ViewStreamError in
 * view-client.ts and nowhere else.
 */

export abstract class ViewError extends Error {
  abstract readonly class: string;
}

/** A view message that cannot be applied as it stands (bad sizes, unknown stream, bad enum). */
export class ViewProtocolError extends ViewError {
  readonly class = 'view_protocol' as const;
  constructor(detail: string) {
    super(`view_protocol: ${detail}`);
    this.name = 'ViewProtocolError';
  }
}

/**
 * A delta that does not continue the cache's (epoch, version): never applied out of order; the
 * cache stops claiming freshness until a snapshot replaces it.
 */
export class ViewGapError extends ViewError {
  readonly class = 'view_gap' as const;
  constructor(detail: string) {
    super(`view_gap: ${detail}`);
    this.name = 'ViewGapError';
  }
}

/** A stream's hash seed has no hasher yet: the caller must `HasherPool.ensure` before applying. */
export class HasherNotReadyError extends ViewError {
  readonly class = 'hasher_not_ready' as const;
  constructor(seed: bigint) {
    super(`hasher_not_ready: no content-key hasher loaded for hash_seed ${seed}`);
    this.name = 'HasherNotReadyError';
  }
}

/** The WatchView call failed or ended; `grpcCode` is the gRPC status name when there was one. */
export class ViewStreamError extends ViewError {
  readonly class = 'view_stream' as const;
  constructor(
    readonly address: string,
    readonly grpcCode: string,
    detail: string,
  ) {
    super(`view_stream: ${address}: ${grpcCode}: ${detail}`);
    this.name = 'ViewStreamError';
  }
}

/** whenReady() on a client closed before its first snapshot. */
export class ViewClientClosedError extends ViewError {
  readonly class = 'closed' as const;
  constructor() {
    super('closed: view client closed before the first snapshot');
    this.name = 'ViewClientClosedError';
  }
}
