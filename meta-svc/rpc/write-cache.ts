/**
 * startWriteCache and finishWriteCache (kvcm-meta §6), and the registration of every
 * write-side RPC of the data path (removeCache and trimCache live in remove-trim.ts).
 * Every request field is read and validated before the first side effect.
 */
import { MetaError, missingFields } from '../meta-errors.js';
import type { RpcContext, RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { blockMaskToWire, readBlockMask } from '../keys/block-mask.js';
import { keysOf, readRawKeys } from '../keys/request-keys.js';
import { cacheLocationOf } from '../lookup/cache-location-wire.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './rpc-registrar.js';
import { registerRemoveTrimRpcs } from './remove-trim.js';

/** Registers startWriteCache, finishWriteCache, removeCache and trimCache. */
export function registerWriteRpcs(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('startWriteCache', (req) => startWriteCache(dp, req));
  server.registerRpc('finishWriteCache', (req, ctx) => finishWriteCache(dp, req, ctx));
  registerRemoveTrimRpcs(server, dp);
}

async function startWriteCache(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const raw = readRawKeys(req);
  const groupNames = req.strList('location_spec_group_names');
  const timeoutSeconds = req.int32('write_timeout_seconds');
  const minReplica = req.int32('min_replica_count');
  if (instanceId === '') throw missingFields('StartWriteCache', ['instance_id']);

  const instance = await dp.instances.resolve(instanceId);
  const keys = keysOf('StartWriteCache', raw, instance.record, dp.limits.maxKeysPerRequest, dp.hasher);
  const rec = instance.record;

  // §6 step 1: one registered group name per key, or none (all registered specs).
  const allSpecs = rec.locationSpecInfos.map((s) => s.name);
  let specNamesPerKey: (readonly string[])[];
  if (groupNames.length === 0) specNamesPerKey = keys.map(() => allSpecs);
  else {
    if (groupNames.length !== keys.length) {
      throw new MetaError('INVALID_ARGUMENT', `${groupNames.length} location_spec_group_names for ${keys.length} keys (§6 step 1)`);
    }
    const groups = new Map(rec.locationSpecGroups.map((g) => [g.name, g.specNames]));
    specNamesPerKey = groupNames.map((g) => {
      const names = groups.get(g);
      if (names === undefined) throw new MetaError('INVALID_ARGUMENT', `unknown location_spec_group_name ${JSON.stringify(g)} (§6 step 1)`);
      return names;
    });
  }
  // §6 step 6.
  if (timeoutSeconds < 0) throw new MetaError('INVALID_ARGUMENT', `write_timeout_seconds ${timeoutSeconds} < 0 (§6 step 6)`);
  const seconds =
    timeoutSeconds === 0 ? dp.limits.defaultWriteTimeoutSeconds : Math.min(timeoutSeconds, dp.limits.maxWriteTimeoutSeconds);

  const out = await dp.sessions.start({
    instance,
    keys,
    specNamesPerKey,
    minReplicaCount: minReplica <= 0 ? 1 : minReplica,
    timeoutMs: seconds * 1000,
    nowUs: BigInt(dp.timers.nowMs()) * 1000n,
  });
  return {
    fields: {
      write_session_id: out.sessionId,
      block_mask: blockMaskToWire(out.exists),
      // §6 step 4: each new location with its own id, CLS_WRITING (KVCM parity).
      locations: out.locations.map((l) => cacheLocationOf(l.storageType, l.specs, l.locationId, 'CLS_WRITING')),
    },
  };
}

async function finishWriteCache(
  dp: DataPath,
  req: RequestReader,
  ctx: RpcContext,
): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const sessionId = req.str('write_session_id');
  const successMsg = req.message('success_blocks');
  const success = successMsg === null ? null : readBlockMask(successMsg, 'success_blocks');
  const missing: string[] = [];
  if (instanceId === '') missing.push('instance_id');
  if (sessionId === '') missing.push('write_session_id');
  if (missing.length > 0) throw missingFields('FinishWriteCache', missing);

  await dp.instances.resolve(instanceId);
  const { sessionInstanceId } = await dp.sessions.finish(sessionId, success);
  if (sessionInstanceId !== instanceId) {
    // §6 step 7: the session's own instance was used.
    dp.metrics.writeSessionInstanceMismatchTotal.inc();
    ctx.log.warn(
      { request_instance_id: instanceId, session_instance_id: sessionInstanceId, write_session_id: sessionId },
      'finishWriteCache named another instance than its session; the session instance was used',
    );
  }
  return { fields: {} };
}
