/**
 * A simulated engine as a process (`node dist/tools/engine-sim/cli.js`, or without a build
 * `node --import tsx tools/engine-sim/cli.ts`); see engine-process.ts.
 *
 * Readiness: the JSON log line `"msg":"engine simulator ready"` once the sockets are bound, the
 * HTTP port listens and the etcd key is written. Exit codes: 0 after SIGINT/SIGTERM (the lease is
 * revoked so the directory drops the instance at once), 2 for a bad flag (one stderr line), 1 when
 * a socket or etcd cannot be reached at start.
 */
import { runEngineProcess } from './engine-process.js';

void runEngineProcess();
