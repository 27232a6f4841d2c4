/**
 * The 14 RPC names of kvcm-meta §1.1 and each response message's fields at their defaults
 * (§5.1, §7.1), in field-number order. Every 200 body starts from these so that an error
 * response (thrown MetaError, SERVICE_NOT_READY, UNSUPPORTED, INTERNAL_ERROR) still prints every
 * scalar/repeated field as §1.3 requires; unset sub-messages (`instance_info`, `block_mask`,
 * `leader_endpoint`) are simply absent.
 */

export const RPC_NAMES = [
  'registerInstance',
  'getInstanceInfo',
  'getCacheLocation',
  'getCacheLocationsByBackend',
  'getCacheLocationLen',
  'startWriteCache',
  'finishWriteCache',
  'removeCache',
  'trimCache',
  'getCacheMeta',
  'getCacheMetaDetail',
  'reportEvent',
  'getHostCacheState',
  'getClusterInfo',
] as const;

export type RpcName = (typeof RPC_NAMES)[number];

const RPC_NAME_SET: ReadonlySet<string> = new Set(RPC_NAMES);

export function isRpcName(s: string): s is RpcName {
  return RPC_NAME_SET.has(s);
}

/** Fresh default fields (without `header`) of `rpc`'s response. */
export function defaultResponseFields(rpc: RpcName): Record<string, unknown> {
  switch (rpc) {
    case 'registerInstance':
      return { storage_configs: '', extra_info: '' };
    case 'getInstanceInfo':
      return { instance_group: '' };
    case 'getCacheLocation':
      return { locations: [] };
    case 'getCacheLocationsByBackend':
      return { key_locations: [] };
    case 'getCacheLocationLen':
      return { cache_location_len: 0n };
    case 'startWriteCache':
      return { write_session_id: '', locations: [] };
    case 'finishWriteCache':
    case 'removeCache':
    case 'trimCache':
      return {};
    case 'getCacheMeta':
      return { locations: [], metas: [] };
    case 'getCacheMetaDetail':
      return { items: [] };
    case 'reportEvent':
      return { item_results: [], committed_snapshot_version: '', retry_after_ms: 0n, snapshot_required: false, extra_info: '' };
    case 'getHostCacheState':
      return { hosts: [] };
    case 'getClusterInfo':
      return { self_node_id: '', leader_node_id: '' };
  }
}
