/**
 * §8 `check_storage_available_when_open`: a checked storage whose `root_path` does not exist
 * is unavailable (not used for placement) and reported with a WARN by the caller. Pure apart
 * from the injected `pathExists`.
 */
import type { MetaConfig, StorageConfig } from './meta-config.js';

export interface StorageAvailability {
  readonly config: MetaConfig;
  /** One line per storage turned unavailable. */
  readonly warnings: readonly string[];
}

export function checkStorageAvailability(config: MetaConfig, pathExists: (path: string) => boolean): StorageAvailability {
  const warnings: string[] = [];
  const storages: StorageConfig[] = config.storages.map((s) => {
    if (!s.checkStorageAvailableWhenOpen || s.eventReport || !s.available) return s;
    if (s.rootPath !== '' && pathExists(s.rootPath)) return s;
    warnings.push(`storage ${s.globalUniqueName}: root_path ${JSON.stringify(s.rootPath)} does not exist; storage unavailable`);
    return Object.freeze({ ...s, available: false });
  });
  if (warnings.length === 0) return { config, warnings };
  return { config: Object.freeze({ ...config, storages: Object.freeze(storages) }), warnings };
}
