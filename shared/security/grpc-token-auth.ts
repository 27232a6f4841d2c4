/**
 * `x-internal-token` metadata on a gRPC service (the directory's KvDirectory): one wrapper over
 * the whole service implementation, applied at registration, so no handler carries its own copy
 * of the check and a method added later is guarded too. Health and reflection are registered
 * without it and stay open for probes.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../log/logger.js';
import { INTERNAL_TOKEN_HEADER, INVALID_TOKEN_MESSAGE, type InternalTokenCheck } from './internal-token.js';

/** The status a refused call ends with (grpc-js turns this object into the call's status). */
const REFUSED: Partial<grpc.StatusObject> = { code: grpc.status.UNAUTHENTICATED, details: INVALID_TOKEN_MESSAGE };

/**
 * `impl` with every method of `service` answering UNAUTHENTICATED "invalid internal token" unless
 * the call's metadata carries the token; `impl` itself when no token is required. A refused call
 * never reaches its handler, so it reads no request stream and learns nothing.
 */
export function requireInternalToken(
  service: grpc.ServiceDefinition,
  impl: grpc.UntypedServiceImplementation,
  check: InternalTokenCheck,
  log?: Logger,
): grpc.UntypedServiceImplementation {
  if (!check.required) return impl;
  const guarded: grpc.UntypedServiceImplementation = {};
  for (const name of Object.keys(impl)) {
    const handler = impl[name]!;
    const method = service[name];
    // Not a method of `service`: grpc-js ignores it at addService, nothing to guard.
    if (method === undefined) {
      guarded[name] = handler;
      continue;
    }
    const refuse = (call: ServerSurfaceCall): boolean => {
      if (check.accepts(tokenOf(call.metadata))) return false;
      log?.warn({ rpc: name, peer: call.getPeer() }, 'gRPC call refused: invalid internal token');
      return true;
    };
    guarded[name] = method.responseStream ? guardStreaming(handler, refuse) : guardUnary(handler, refuse);
  }
  return guarded;
}

/** The one value of the token key; a repeated or binary value counts as absent. */
function tokenOf(md: grpc.Metadata): string | undefined {
  const values = md.get(INTERNAL_TOKEN_HEADER);
  return values.length === 1 && typeof values[0] === 'string' ? values[0] : undefined;
}

/** What every server call has: metadata and the peer (grpc-js does not export its own name for it). */
type ServerSurfaceCall = Pick<grpc.ServerUnaryCall<unknown, unknown>, 'metadata' | 'getPeer'>;

type Refuse = (call: ServerSurfaceCall) => boolean;

/** Unary and client-streaming handlers answer through their callback. */
function guardUnary(handler: grpc.UntypedHandleCall, refuse: Refuse): grpc.UntypedHandleCall {
  // UntypedHandleCall is a union of four signatures; both of these take (call, callback).
  const h = handler as (call: ServerSurfaceCall, callback: grpc.sendUnaryData<unknown>) => void;
  return ((call: ServerSurfaceCall, callback: grpc.sendUnaryData<unknown>) => {
    if (refuse(call)) callback(REFUSED);
    else h(call, callback);
  }) as grpc.UntypedHandleCall;
}

/** Server-streaming and bidi handlers end with an 'error' on the call, which grpc-js sends as the status. */
function guardStreaming(handler: grpc.UntypedHandleCall, refuse: Refuse): grpc.UntypedHandleCall {
  const h = handler as (call: grpc.ServerWritableStream<unknown, unknown>) => void;
  return ((call: grpc.ServerWritableStream<unknown, unknown>) => {
    if (refuse(call)) call.emit('error', REFUSED);
    else h(call);
  }) as grpc.UntypedHandleCall;
}
