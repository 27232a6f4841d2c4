/**
 * Fresh load of one instance, whichever source reported it: an xLLM heartbeat or etcd value
 * (discovery/load-report.ts) or a vLLM/SGLang `/metrics` scrape (engines/). Its own module so
 * that neither source's folder imports the other's.
 */
export interface InstanceLoad {
  readonly waitingRequests: number;
  /** 0..1 */
  readonly gpuCacheUsage: number;
  /** Recent max TTFT / TBT in ms; null when not reported. */
  readonly recentMaxTtftMs: number | null;
  readonly recentMaxTbtMs: number | null;
}
