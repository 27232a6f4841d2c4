/**
 * registerInstance, getInstanceInfo and getClusterInfo (kvcm-meta §4.1, §4.2, §5.1, §5.2).
 * Handlers read every field before any side effect (a reader BadRequestError is HTTP 400).
 */
import type { InstanceGroupConfig, MetaConfig } from '../config/meta-config.js';
import type { MetaHttpServer, RpcResult } from '../http/meta-http-server.js';
import { QueryType, enumName } from '../meta-enums.js';
import { missingFields } from '../meta-errors.js';
import type { InstanceRegistry } from '../instances/instance-registry.js';
import { REGISTER_INSTANCE_REQUEST, parseRegistration } from '../instances/registration.js';
import { storageConfigsJson } from '../instances/storage-configs-json.js';
import type { InstanceRecord } from '../store/meta-store.js';
import type { RequestReader } from '../wire/request-reader.js';

export interface InstanceRpcDeps {
  readonly config: MetaConfig;
  readonly instances: InstanceRegistry;
}

export function registerInstanceRpcs(server: MetaHttpServer, deps: InstanceRpcDeps): void {
  server.registerRpc('registerInstance', (req) => registerInstance(deps, req));
  server.registerRpc('getInstanceInfo', async (req) => {
    const { record, group } = await deps.instances.resolveRequestInstance(req, 'GetInstanceInfo');
    return { fields: { instance_group: group.name, instance_info: instanceInfoOf(record, group) } };
  });
  server.registerRpc('getClusterInfo', async () => clusterInfo(deps.config));
}

async function registerInstance(deps: InstanceRpcDeps, req: RequestReader): Promise<RpcResult> {
  const parsed = parseRegistration(req, (g) => deps.instances.isConfiguredGroup(g));
  if (!parsed.ok) throw missingFields(REGISTER_INSTANCE_REQUEST, parsed.invalidFields.map((f) => f.entry));
  const { record } = await deps.instances.register(parsed.record);
  const group = deps.instances.group(record.instanceGroup) as InstanceGroupConfig;
  return {
    fields: {
      storage_configs: storageConfigsJson(group, (n) => deps.instances.storage(n)),
      extra_info: group.extraInfo,
    },
  };
}

/** §3 InstanceInfo of a stored registration; group names come from the configured group. */
export function instanceInfoOf(record: InstanceRecord, group: InstanceGroupConfig): Record<string, unknown> {
  const md = record.modelDeployment;
  return {
    quota_group_name: group.quotaGroupName,
    instance_group_name: group.name,
    instance_id: record.instanceId,
    block_size: record.blockSize,
    location_spec_infos: record.locationSpecInfos.map((s) => ({ name: s.name, size: s.size })),
    model_deployment:
      md === null
        ? undefined
        : {
            model_name: md.modelName,
            dtype: md.dtype,
            use_mla: md.useMla,
            tp_size: md.tpSize,
            dp_size: md.dpSize,
            lora_name: md.loraName,
            pp_size: md.ppSize,
            extra: md.extra,
            user_data: md.userData,
            use_eagle_pop: md.useEaglePop,
          },
    location_spec_groups: record.locationSpecGroups.map((g) => ({ name: g.name, spec_names: [...g.specNames] })),
    default_query_type: enumName(QueryType, record.defaultQueryType),
  };
}

/** §5.2 getClusterInfo: the single node is its own leader. */
export function clusterInfo(config: MetaConfig): RpcResult {
  return {
    fields: {
      self_node_id: config.nodeId,
      leader_node_id: config.nodeId,
      leader_endpoint: {
        node_id: config.nodeId,
        host: config.http.advertiseHost,
        meta_rpc_port: 0,
        meta_http_port: config.http.port,
        custom_info: '',
      },
    },
  };
}
