/**
 * The part of MetaHttpServer the data-path RPC modules use, so they register handlers without
 * depending on the HTTP edge itself.
 */
import type { RpcHandler } from '../http/meta-http-server.js';
import type { RpcName } from '../wire/response-defaults.js';

export interface RpcRegistrar {
  registerRpc(name: RpcName, handler: RpcHandler): void;
}
