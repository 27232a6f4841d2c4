/**
 * A CLI (kvctl, a service's `--help`) run to completion from the repository root, with stdout and
 * stderr kept apart so a test can check what each said. Long-running children go through
 * `shared/process/service-process.ts` instead.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** How a run-to-completion child exited and everything it printed. */
export interface CompletedRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `node --import tsx <entry> ...args` from the repository root, run to completion; `env` is added to this process's. */
export function runToCompletion(entry: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<CompletedRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
