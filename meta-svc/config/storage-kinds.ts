/**
 * Config storage `type` values (kvcm-meta §4.5, §8) and what each implies: its StorageType,
 * whether it is an event-report storage (§7) or a writable one (§6), the URI scheme of its
 * locations (§4.5) and its member in registerInstance's `storage_configs` (§5.2).
 */
import { StorageType } from '../meta-enums.js';

export type StorageKind =
  | 'file'
  | 'nfs'
  | 'dummy'
  | 'hf3fs'
  | 'vcns_hf3fs'
  | 'mooncake'
  | 'pace'
  | 'pace_ssd'
  | 'event_report_l1p5'
  | 'event_report_l2';

export interface StorageKindInfo {
  /** §2 StorageType number. */
  readonly storageType: number;
  readonly eventReport: boolean;
  /** §4.5 URI scheme; '' for event-report storages (reporter-supplied URIs). */
  readonly uriScheme: string;
  /** §5.2 `storage_configs` member name; '' for event-report storages (never listed). */
  readonly configMember: string;
  /** §5.2: 3FS storages name their root `root_dir`, the others `root_path`. */
  readonly rootMember: 'root_path' | 'root_dir';
  /** §5.2 `tair_mem_pool.media_type` (pace 2, pace_ssd 5), else null. */
  readonly mediaType: number | null;
}

export const STORAGE_KINDS: Readonly<Record<StorageKind, StorageKindInfo>> = {
  file: { storageType: StorageType.ST_NFS, eventReport: false, uriScheme: 'file', configMember: 'nfs', rootMember: 'root_path', mediaType: null },
  nfs: { storageType: StorageType.ST_NFS, eventReport: false, uriScheme: 'file', configMember: 'nfs', rootMember: 'root_path', mediaType: null },
  dummy: { storageType: StorageType.ST_DUMMY, eventReport: false, uriScheme: 'dummy', configMember: 'dummy', rootMember: 'root_path', mediaType: null },
  hf3fs: { storageType: StorageType.ST_3FS, eventReport: false, uriScheme: '3fs', configMember: 'threefs', rootMember: 'root_dir', mediaType: null },
  vcns_hf3fs: {
    storageType: StorageType.ST_VCNS_3FS,
    eventReport: false,
    uriScheme: '3fs',
    configMember: 'vcnsthreefs',
    rootMember: 'root_dir',
    mediaType: null,
  },
  mooncake: { storageType: StorageType.ST_MOONCAKE, eventReport: false, uriScheme: 'mooncake', configMember: 'mooncake', rootMember: 'root_path', mediaType: null },
  pace: { storageType: StorageType.ST_TAIRMEMPOOL, eventReport: false, uriScheme: 'pace', configMember: 'tair_mem_pool', rootMember: 'root_path', mediaType: 2 },
  pace_ssd: {
    storageType: StorageType.ST_TAIRMEMPOOL_SSD,
    eventReport: false,
    uriScheme: 'pace',
    configMember: 'tair_mem_pool',
    rootMember: 'root_path',
    mediaType: 5,
  },
  event_report_l1p5: { storageType: StorageType.ST_EVENT_REPORT_L1P5, eventReport: true, uriScheme: '', configMember: '', rootMember: 'root_path', mediaType: null },
  event_report_l2: { storageType: StorageType.ST_EVENT_REPORT_L2, eventReport: true, uriScheme: '', configMember: '', rootMember: 'root_path', mediaType: null },
};

export function isStorageKind(s: string): s is StorageKind {
  return Object.prototype.hasOwnProperty.call(STORAGE_KINDS, s);
}
