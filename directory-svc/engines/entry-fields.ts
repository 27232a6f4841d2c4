/**
 * The engines-file fields a listed entry (`name`, engines.md §4) and a DNS entry (`dns`, §6)
 * share, validated once for both: `kind`, `role`, `block_size`, and the `models` pin
 * (cache-identity §1). Pure; errors are `ConfigError`s naming `engines[i].field`.
 */
import { ConfigError } from '../../shared/config/config-error.js';
import { ENGINE_KINDS, isEngineKind, type EngineKind } from '../../shared/config/engine-kind.js';
import { int, show, str, type JsonObject } from '../../shared/config/kv-events-config.js';
import { isModelPinProblem, readModelPin } from '../../shared/view/model-pin.js';
import type { ServedModel } from '../../shared/view/served-models.js';

export type EngineRole = 'DEFAULT' | 'PREFILL' | 'DECODE';

const ROLES: readonly EngineRole[] = ['DEFAULT', 'PREFILL', 'DECODE'];
/** engines.md §4: `dp_size` 1..1024. */
export const MAX_DP_SIZE = 1024;
export const MAX_PORT = 65535;
const MAX_BLOCK_SIZE = 4096;

/** The fields every engine has, whichever way the file names it. */
export interface EngineCommonFields {
  readonly kind: EngineKind;
  readonly role: EngineRole;
  readonly blockSize: number;
  /** cache-identity §1: the pinned served models (first the base); null: scraped from `GET /v1/models`. */
  readonly models: readonly ServedModel[] | null;
}

/** `kind` (required), `role` (default DEFAULT) and `block_size` (required) of the entry at `path`. */
export function engineCommonFields(o: JsonObject, path: string): EngineCommonFields {
  const kind = o['kind'];
  if (kind === undefined) throw new ConfigError(`${path}.kind`, 'required');
  if (!isEngineKind(kind)) throw new ConfigError(`${path}.kind`, `expected one of ${ENGINE_KINDS.join(', ')}, got ${show(kind)}`);
  const roleValue = str(o, 'role', path, 'DEFAULT');
  const role = ROLES.find((r) => r === roleValue);
  if (role === undefined) throw new ConfigError(`${path}.role`, `expected one of ${ROLES.join(', ')}, got ${show(roleValue)}`);
  if (o['block_size'] === undefined) throw new ConfigError(`${path}.block_size`, 'required');
  const blockSize = int(o, 'block_size', path, 0, 1, MAX_BLOCK_SIZE);
  const models = o['models'] === undefined ? null : pinnedModels(o['models'], `${path}.models`);
  return { kind, role, blockSize, models };
}

/** cache-identity §1: a non-empty array of distinct names; null is refused too (leave the field out to scrape). */
function pinnedModels(v: unknown, path: string): readonly ServedModel[] {
  const r = readModelPin(v);
  if (isModelPinProblem(r)) throw new ConfigError(r.index === null ? path : `${path}[${r.index}]`, r.reason);
  return r;
}
