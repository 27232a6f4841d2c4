/**
 * The top of the policy folder: the policy named by `--load_balance_policy`, built from the flags.
 * The only file that imports the policies; they import only the layers below them
 * (policy-types.ts, candidates.ts, the scoring helpers), so the folder has no import cycle.
 */
import type { RouterFlags } from '../../shared/config/router-flags.js';
import type { InflightLoad } from '../inflight/inflight-load.js';
import { CarPolicy } from './car-policy.js';
import type { RoutingPolicy } from './policy-types.js';
import { RoundRobinPolicy } from './round-robin-policy.js';
import { SloAwarePolicy } from './slo-aware-policy.js';
import { TtftPolicy, ttftPolicyOptions, type TtftFlags } from './ttft-policy.js';

export type PolicyFlags = Pick<RouterFlags, 'loadBalancePolicy' | 'carPrefillLambda' | 'carHostHitWeight' | 'targetTtftMs' | 'targetTpotMs'> & TtftFlags;

/**
 * `inflight`: CAR's in-flight load (`--car_inflight_load`); null or absent = off. `routerId`: where
 * the tie rotations start (absent: the first name).
 */
export function createPolicy(flags: PolicyFlags, inflight: InflightLoad | null = null, routerId?: string): RoutingPolicy {
  switch (flags.loadBalancePolicy) {
    case 'CAR':
      return new CarPolicy({ prefillLambda: flags.carPrefillLambda, hostHitWeight: flags.carHostHitWeight, inflight, ...(routerId === undefined ? {} : { routerId }) });
    case 'RR':
      return new RoundRobinPolicy();
    case 'SLO_AWARE':
      return new SloAwarePolicy({ targetTtftMs: flags.targetTtftMs, targetTpotMs: flags.targetTpotMs });
    case 'TTFT':
      return new TtftPolicy(ttftPolicyOptions(flags, inflight, routerId));
    default: {
      const never: never = flags.loadBalancePolicy;
      throw new RangeError(`unknown load_balance_policy ${String(never)}`);
    }
  }
}
