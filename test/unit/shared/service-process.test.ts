// The one child-process supervisor (shared/process/service-process.ts), on real `sh` children:
// what tests, the stack tool and benches rely on when a child prints, fails to start, is
// signalled, or is left running.
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidAlive, ServiceProcess, stopAllProcesses } from '../../../shared/process/service-process.js';
import { waitFor } from '../../helpers/ports.js';

function sh(script: string, opts: { logFile?: string; stopWithAll?: boolean } = {}): ServiceProcess {
  return ServiceProcess.spawn({ name: 'sh', command: 'sh', args: ['-c', script], ...opts });
}

describe('ServiceProcess: the supervisor of every child process', function () {
  this.timeout(20_000);
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'service-process-'));
  });
  afterEach(async () => {
    await stopAllProcesses(1000);
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps every line, each stream apart, JSON lines parsed, and appends all output to the log file', async () => {
    const logFile = join(dir, 'child.log');
    const p = sh(`echo out1; echo err1 >&2; echo '{"msg":"ready","n":1}'; printf last`, { logFile });
    expect(await p.waitForExit()).to.deep.equal({ code: 0, signal: null });
    expect([...p.output].sort()).to.deep.equal(['err1', 'last', 'out1', '{"msg":"ready","n":1}'].sort());
    expect(p.linesOf('stdout')).to.deep.equal(['out1', '{"msg":"ready","n":1}', 'last']);
    expect(p.linesOf('stderr')).to.deep.equal(['err1']);
    expect(p.logLines).to.deep.equal([{ msg: 'ready', n: 1 }]);
    await p.stop();
    // The file gets the raw chunks as they arrive (the two streams may meet mid-line).
    const logged = readFileSync(logFile, 'utf8');
    for (const text of ['out1\n', 'err1\n', '{"msg":"ready","n":1}\n', 'last']) expect(logged).to.include(text);
    expect(logged.length).to.equal('out1\nerr1\n{"msg":"ready","n":1}\nlast'.length);
  });

  it('a binary that does not exist exits 127 with the spawn error in its output; a wait on it fails at once', async () => {
    const p = ServiceProcess.spawn({ name: 'missing', command: join(dir, 'no-such-binary') });
    const err = await p.waitUntil('ready', () => false, 10_000).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).to.match(/^missing exited \(code 127, signal null\) before ready/);
    expect((await p.stop()).code).to.equal(127);
    expect(p.tail()).to.include('ENOENT');
  });

  it('stop() ends the whole process group, grandchildren included; signal() reaches the child', async () => {
    const p = sh('sleep 30 & echo "child $!"; trap "echo got INT" INT; while true; do sleep 0.1; done');
    const line = await p.waitForOutput(/^child \d+$/);
    const grandchild = Number(line.split(' ')[1]);
    p.signal('SIGINT');
    await p.waitForOutput(/^got INT$/);
    expect(p.isRunning).to.equal(true);
    expect((await p.stop(2000)).signal).to.equal('SIGTERM');
    // The orphaned grandchild is reaped a moment after the group signal.
    await waitFor(() => !p.groupAlive() && !pidAlive(grandchild), 5000, 'the process group gone');
  });

  it('ipc: messages both ways over the channel fork() would open', async () => {
    const p = ServiceProcess.spawn({
      name: 'echo',
      command: process.execPath,
      args: ['-e', "process.on('message', (m) => process.send({ echo: m }, () => process.exit(0)))"],
      ipc: true,
    });
    const got = new Promise<unknown>((resolve) => p.onMessage(resolve));
    p.send({ n: 1 });
    expect(await got).to.deep.equal({ echo: { n: 1 } });
    expect((await p.whenExited()).code).to.equal(0);
  });

  it('stopAllProcesses() leaves a child with stopWithAll:false to its owner', async () => {
    const owned = sh('while true; do sleep 0.1; done', { stopWithAll: false });
    const loose = sh('while true; do sleep 0.1; done');
    await stopAllProcesses(2000);
    expect(loose.isRunning).to.equal(false);
    expect(owned.isRunning).to.equal(true);
    await owned.stop(2000);
    expect(owned.isRunning).to.equal(false);
  });
});
