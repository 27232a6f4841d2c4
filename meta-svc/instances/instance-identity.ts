/**
 * §4.1 identity of a registration: group, block size, the spec name→size map and the spec group
 * name→set map (order ignored), and the model deployment without `user_data`. An absent
 * model_deployment equals one with every field at its default (protobuf-JSON cannot tell them
 * apart reliably across clients). Pure.
 */
import type { InstanceRecord, ModelDeploymentRecord } from '../store/meta-store.js';

const EMPTY_DEPLOYMENT: ModelDeploymentRecord = {
  modelName: '',
  dtype: '',
  useMla: false,
  tpSize: 0,
  dpSize: 0,
  loraName: '',
  ppSize: 0,
  extra: '',
  userData: '',
  useEaglePop: false,
};

export function sameIdentity(a: InstanceRecord, b: InstanceRecord): boolean {
  return identityDifferences(a, b).length === 0;
}

/**
 * The identity fields in which `a` and `b` differ, in the §1.4 DUPLICATE_ENTITY order
 * `instance_group, block_size, location_spec_infos, location_spec_groups, model_deployment`.
 */
export function identityDifferences(a: InstanceRecord, b: InstanceRecord): string[] {
  const out: string[] = [];
  if (a.instanceGroup !== b.instanceGroup) out.push('instance_group');
  if (a.blockSize !== b.blockSize) out.push('block_size');
  if (!sameSpecInfos(a, b)) out.push('location_spec_infos');
  if (!sameSpecGroups(a, b)) out.push('location_spec_groups');
  if (!sameDeployment(a.modelDeployment ?? EMPTY_DEPLOYMENT, b.modelDeployment ?? EMPTY_DEPLOYMENT)) out.push('model_deployment');
  return out;
}

function sameSpecInfos(a: InstanceRecord, b: InstanceRecord): boolean {
  if (a.locationSpecInfos.length !== b.locationSpecInfos.length) return false;
  const sizes = new Map<string, bigint>();
  for (const s of a.locationSpecInfos) sizes.set(s.name, s.size);
  for (const s of b.locationSpecInfos) if (sizes.get(s.name) !== s.size) return false;
  return true;
}

function sameSpecGroups(a: InstanceRecord, b: InstanceRecord): boolean {
  if (a.locationSpecGroups.length !== b.locationSpecGroups.length) return false;
  const groups = new Map<string, Set<string>>();
  for (const g of a.locationSpecGroups) groups.set(g.name, new Set(g.specNames));
  for (const g of b.locationSpecGroups) {
    const other = groups.get(g.name);
    if (!other) return false;
    const mine = new Set(g.specNames);
    if (mine.size !== other.size) return false;
    for (const n of mine) if (!other.has(n)) return false;
  }
  return true;
}

/** Every deployment field but `user_data` (mutable, §4.1). */
function sameDeployment(da: ModelDeploymentRecord, db: ModelDeploymentRecord): boolean {
  return (
    da.modelName === db.modelName &&
    da.dtype === db.dtype &&
    da.useMla === db.useMla &&
    da.tpSize === db.tpSize &&
    da.dpSize === db.dpSize &&
    da.loraName === db.loraName &&
    da.ppSize === db.ppSize &&
    da.extra === db.extra &&
    da.useEaglePop === db.useEaglePop
  );
}

/**
 * `existing` with the §4.1 mutable fields (`model_deployment.user_data`, `default_query_type`)
 * taken from `incoming`; the caller has checked `sameIdentity`.
 */
export function withMutableFieldsOf(existing: InstanceRecord, incoming: InstanceRecord): InstanceRecord {
  let modelDeployment = existing.modelDeployment;
  const userData = incoming.modelDeployment?.userData ?? '';
  if (modelDeployment === null) modelDeployment = incoming.modelDeployment;
  else if (modelDeployment.userData !== userData) modelDeployment = { ...modelDeployment, userData };
  return { ...existing, modelDeployment, defaultQueryType: incoming.defaultQueryType };
}

/** True when the mutable fields differ (a re-registration needs a write). */
export function mutableFieldsDiffer(a: InstanceRecord, b: InstanceRecord): boolean {
  return a.defaultQueryType !== b.defaultQueryType || (a.modelDeployment?.userData ?? '') !== (b.modelDeployment?.userData ?? '') || (a.modelDeployment === null) !== (b.modelDeployment === null);
}
