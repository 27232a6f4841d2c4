/**
 * A registerInstance body (kvcm-meta §5.1) read and checked against §4.1, shared by the RPC and
 * by the config's `bootstrap_instances` (§8). Pure. Wrong JSON types throw BadRequestError from
 * the reader; rule violations are returned as the list of invalid top-level fields, in field
 * number order, for the §1.4 `missing or invalid fields` message: a missing (or empty) field by
 * its name, a present but invalid one as `<field>=<value>` (KVCM parity).
 */
import { QueryType } from '../meta-enums.js';
import { invalidFieldEntry } from '../meta-errors.js';
import type { RequestReader } from '../wire/request-reader.js';
import type {
  InstanceRecord,
  LocationSpecGroupRecord,
  LocationSpecInfoRecord,
  ModelDeploymentRecord,
} from '../store/meta-store.js';

export const REGISTER_INSTANCE_REQUEST = 'RegisterInstance';
const MAX_INSTANCE_ID_BYTES = 256;
// C0, DEL and C1 controls (§4.1 "no control characters").
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;

/** One §1.4 offending field: its name (a config path segment) and its message entry. */
export interface InvalidField {
  readonly field: string;
  /** `<field>` when missing or empty, `<field>=<value>` when present but invalid (KVCM parity). */
  readonly entry: string;
}

export type RegistrationParse =
  | { readonly ok: true; readonly record: InstanceRecord }
  | { readonly ok: false; readonly invalidFields: readonly InvalidField[] };

const missing = (field: string): InvalidField => ({ field, entry: field });
const invalid = (field: string, value: unknown): InvalidField => ({ field, entry: invalidFieldEntry(field, value) });

/** §4.1 instance_id rule, also used wherever an id is accepted. */
export function isValidInstanceId(id: string): boolean {
  const bytes = Buffer.byteLength(id, 'utf8');
  return bytes >= 1 && bytes <= MAX_INSTANCE_ID_BYTES && !CONTROL_CHARS.test(id);
}

/**
 * @param isConfiguredGroup whether a group name is in the current config (§4.1)
 */
export function parseRegistration(req: RequestReader, isConfiguredGroup: (name: string) => boolean): RegistrationParse {
  const bad: InvalidField[] = [];

  const instanceGroup = req.str('instance_group');
  if (instanceGroup === '') bad.push(missing('instance_group'));
  else if (!isConfiguredGroup(instanceGroup)) bad.push(invalid('instance_group', instanceGroup));

  const instanceId = req.str('instance_id');
  if (instanceId === '') bad.push(missing('instance_id'));
  else if (!isValidInstanceId(instanceId)) bad.push(invalid('instance_id', instanceId));

  const blockSize = req.int32('block_size');
  if (!req.has('block_size')) bad.push(missing('block_size'));
  else if (blockSize <= 0) bad.push(invalid('block_size', blockSize));

  const specInfos: LocationSpecInfoRecord[] = req.messages('location_spec_infos').map((m) => ({ name: m.str('name'), size: m.int64('size') }));
  const specNames = new Set<string>();
  let specsOk = specInfos.length > 0;
  for (const s of specInfos) {
    if (s.name === '' || specNames.has(s.name) || s.size <= 0n) specsOk = false;
    specNames.add(s.name);
  }
  if (specInfos.length === 0) bad.push(missing('location_spec_infos'));
  else if (!specsOk) bad.push(invalid('location_spec_infos', specInfos));

  const modelDeployment = readModelDeployment(req.message('model_deployment'));

  const specGroups: LocationSpecGroupRecord[] = req
    .messages('location_spec_groups')
    .map((m) => ({ name: m.str('name'), specNames: m.strList('spec_names') }));
  const groupNames = new Set<string>();
  let groupsOk = true;
  for (const g of specGroups) {
    if (g.name === '' || groupNames.has(g.name) || g.specNames.length === 0) groupsOk = false;
    for (const n of g.specNames) if (!specNames.has(n)) groupsOk = false;
    groupNames.add(g.name);
  }
  if (!groupsOk) bad.push(invalid('location_spec_groups', specGroups.map((g) => ({ name: g.name, spec_names: g.specNames }))));

  const defaultQueryType = req.enumOf('default_query_type', QueryType);

  if (bad.length > 0) return { ok: false, invalidFields: bad };
  return {
    ok: true,
    record: {
      instanceId,
      instanceGroup,
      blockSize,
      locationSpecInfos: specInfos,
      locationSpecGroups: specGroups,
      modelDeployment,
      defaultQueryType,
    },
  };
}

function readModelDeployment(m: RequestReader | null): ModelDeploymentRecord | null {
  if (m === null) return null;
  return {
    modelName: m.str('model_name'),
    dtype: m.str('dtype'),
    useMla: m.bool('use_mla'),
    tpSize: m.int32('tp_size'),
    dpSize: m.int32('dp_size'),
    loraName: m.str('lora_name'),
    ppSize: m.int32('pp_size'),
    extra: m.str('extra'),
    userData: m.str('user_data'),
    useEaglePop: m.bool('use_eagle_pop'),
  };
}
