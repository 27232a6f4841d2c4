/**
 * The one-command local stack (tools/stack.ts, `npm start`) as a real process, every port a free
 * one: it starts etcd, simulated engines, directory-svc, meta-svc and a CAR router, runs the demo through
 * the router's proxy, and stops everything it started. "No child left behind" is checked on the
 * pids the stack prints for each process and on the stack's process group.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { freePort, waitFor } from '../helpers/ports.js';
import { pidAlive, ServiceProcess, stopAllProcesses } from '../../shared/process/service-process.js';

const STACK_ENTRY = 'tools/stack.ts';
/** Everything from tsx's first compile to the last stop, on a shared 2-core machine. */
const STACK_RUN_MS = 180000;

async function freePortFlags(): Promise<{ args: string[]; routerPort: number; metaPort: number }> {
  const [routerPort, metaPort] = [await freePort(), await freePort()];
  const args = [
    `--router_port=${routerPort}`,
    `--directory_grpc_port=${await freePort()}`,
    `--directory_http_port=${await freePort()}`,
    `--meta_port=${metaPort}`,
    `--etcd_port=${await freePort()}`,
    `--etcd_peer_port=${await freePort()}`,
    '--engine_base_port=0',
  ];
  return { args, routerPort, metaPort };
}

/** etcd, directory-svc, meta-svc, four engines of qwen3 (+ sql-lora), one of llama-3.1 (cache-identity), the router. */
const XLLM_CHILDREN = ['etcd', 'directory', 'meta', 'engine-0', 'engine-1', 'engine-2', 'engine-3', 'engine-4', 'router'];
/** engines.md §6: a vLLM fleet needs no etcd, and the stack starts none. */
const VLLM_CHILDREN = XLLM_CHILDREN.filter((n) => n !== 'etcd');

/** Names of the processes the stack reported starting, sorted. */
function startedNames(stack: ServiceProcess): string[] {
  return stack.output.flatMap((l) => {
    const m = /^\[stack\] started (\S+) \(pid \d+\)$/.exec(l);
    return m === null ? [] : [m[1]!];
  }).sort();
}

/** Pids of the processes the stack reported starting (`[stack] started <name> (pid N)`). */
function childPids(stack: ServiceProcess): number[] {
  return stack.output.flatMap((l) => {
    const m = /^\[stack\] started \S+ \(pid (\d+)\)$/.exec(l);
    return m === null ? [] : [Number(m[1])];
  });
}

/** `started`: what the stack should have started (default etcd, 4 engines, directory, meta-svc and router). */
async function expectNothingLeft(stack: ServiceProcess, started: readonly string[] = XLLM_CHILDREN): Promise<void> {
  const pids = childPids(stack);
  expect(startedNames(stack), 'the processes the stack started').to.deep.equal([...started].sort());
  expect(pids.length).to.equal(started.length);
  // The stack waits for each child to exit before it exits itself.
  expect(pids.filter(pidAlive), 'children still alive').to.deep.equal([]);
  // tsx's esbuild helper shares the stack's process group and leaves when its pipe to the stack
  // closes, a moment after the stack: wait for that, and name whatever stays.
  await waitFor(() => !stack.groupAlive(), 10000, 'an empty stack process group').catch((e: Error) => {
    throw new Error(`${e.message}; left: ${groupMembers(stack.pid)}`);
  });
}

function groupMembers(pgid: number): string {
  const rows = execFileSync('ps', ['-eo', 'pid=,pgid=,args='], { encoding: 'utf8' }).split('\n');
  return rows.filter((r) => r.trim().split(/\s+/)[1] === String(pgid)).join('; ') || '(none)';
}

describe('local stack (tools/stack.ts, npm start)', function () {
  this.timeout(STACK_RUN_MS + 30000);

  const stacks: ServiceProcess[] = [];

  afterEach(async () => {
    await stopAllProcesses();
    // The stack's children lead their own process groups; should a stack have been SIGKILLed
    // before stopping them, end them here by the pids it printed. Only then: a stack that exited
    // on its own has reaped them, and their pids may already belong to someone else.
    const killed = stacks.splice(0).filter((st) => st.exit?.signal === 'SIGKILL');
    for (const pid of killed.flatMap(childPids)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  function spawnStack(args: string[]): ServiceProcess {
    const stack = ServiceProcess.spawn({ name: 'stack', entry: STACK_ENTRY, args });
    stacks.push(stack);
    return stack;
  }

  /** Runs `--demo_only` with `extra` flags and checks the demo's second round found the cache; returns the stack's output. */
  async function demoOnly(extra: string[], started: readonly string[] = XLLM_CHILDREN, models = true): Promise<readonly string[]> {
    const { args, routerPort } = await freePortFlags();
    const stack = spawnStack(['--demo_only', ...extra, ...args]);
    const exit = await stack.waitForExit(STACK_RUN_MS);
    const out = stack.tail(200);

    expect(exit.code, out).to.equal(0);
    expect(stack.output, out).to.include(`[stack] router ready at http://127.0.0.1:${routerPort}`);
    const secondRound = stack.output.flatMap((l) => {
      const m = /^\s+round 2\s+prompt (\d+)\s+-> (\S+)\s+tokens\s+(\d+)\s+hit\s+(\d+) \(router view\)\s+cached\s+(\d+) \(engine\)$/.exec(l);
      return m === null ? [] : [{ engine: m[2]!, tokens: Number(m[3]), hit: Number(m[4]), cached: Number(m[5]) }];
    });
    expect(secondRound.length, out).to.equal(3);
    const hits = secondRound.filter((r) => r.hit > 0);
    expect(hits.length, out).to.be.greaterThan(0);
    // The router's credit is what the engine then reused: routing found the cache.
    for (const r of hits) expect(r.cached, out).to.be.greaterThan(0);
    // tokenization.md §3: a multi-turn chat as text, tokenized by the router and the engines alike.
    const chat = stack.output.flatMap((l) => {
      const m = /^\s+chat turn (\d+)\s+-> (\S+)\s+tokens\s+(\d+) \((\w+)\)\s+hit\s+(\d+) \(router view\)\s+cached\s+(\d+) \(engine\)$/.exec(l);
      return m === null ? [] : [{ turn: Number(m[1]), engine: m[2]!, source: m[4]!, hit: Number(m[5]), cached: Number(m[6]) }];
    });
    expect(chat.map((t) => t.source), out).to.deep.equal(['tokenizer', 'tokenizer', 'tokenizer']);
    for (const t of chat.slice(1)) {
      expect(t.engine, out).to.equal(chat[t.turn - 2]!.engine);
      expect(t.hit, out).to.be.greaterThan(0);
      expect(t.cached, out).to.equal(t.hit);
    }
    if (models) expectModelsDemo(stack.output, chat.map((t) => t.engine), out);
    await expectNothingLeft(stack, started);
    return stack.output;
  }

  /**
   * cache-identity: the router lists both base models and the adapter; the adapter's first turn
   * gets nothing from the qwen3 chat's cached system prompt; each model's chat stays on the
   * engine of its first turn and its second turn is credited with what that engine reuses; the
   * llama-3.1 chat is served by an engine no qwen3 chat used.
   */
  function expectModelsDemo(lines: readonly string[], qwenEngines: readonly string[], out: string): void {
    expect(lines, out).to.include('[demo] the router lists 3 models (GET /v1/models): llama-3.1, qwen3, sql-lora (adapter of qwen3)');
    expect(out).to.match(/^\[demo\] sql-lora's first turn as qwen3 would be credited [1-9]\d* tokens \(the system prompt of the chat above\); as sql-lora it gets 0: /m);
    expect(out).to.match(/^\[demo\] POST \/v1\/route for it explains the identity: model sql-lora, lora_name sql-lora, salted false; left out for serving another model: \S+ \(llama-3\.1\)$/m);
    const turns = lines.flatMap((l) => {
      const m = /^\s+(sql-lora|llama-3\.1)\s+turn (\d+)\s+-> (\S+)\s+tokens\s+(\d+) \((\w+)\)\s+hit\s+(\d+) \(router view\)\s+cached\s+(\d+) \(engine\)$/.exec(l);
      return m === null ? [] : [{ model: m[1]!, turn: Number(m[2]), engine: m[3]!, source: m[5]!, hit: Number(m[6]), cached: Number(m[7]) }];
    });
    expect(turns.map((t) => `${t.model} ${t.turn} ${t.source}`), out).to.deep.equal(['sql-lora 1 tokenizer', 'sql-lora 2 tokenizer', 'llama-3.1 1 tokenizer', 'llama-3.1 2 tokenizer']);
    for (const [first, second] of [[turns[0]!, turns[1]!], [turns[2]!, turns[3]!]]) {
      expect([first.hit, first.cached], out).to.deep.equal([0, 0]);
      expect(second.engine, out).to.equal(first.engine);
      expect(second.hit, out).to.be.greaterThan(0);
      expect(second.cached, out).to.equal(second.hit);
    }
    expect([...qwenEngines, turns[0]!.engine], out).to.not.include(turns[2]!.engine);
    expect(lines, out).to.include(`[demo] llama-3.1: 1 of 1 later turns credited on ${turns[2]!.engine}, the engine holding the first`);
  }

  it('--demo_only brings the router to ready, prints a second-round prompt routed with a non-zero hit, shows a second model and an adapter each credited on its engine, exits 0 and leaves no process behind', async () => {
    await demoOnly([]);
  });

  it('E18 --engine_kind=vllm --demo_only runs the same demo, second model and adapter included, against engines listed in an engines file (engines.md §5), with no etcd at all', async () => {
    const out = await demoOnly(['--engine_kind=vllm', '--engines=DEFAULT,DEFAULT,PREFILL,DECODE'], VLLM_CHILDREN);
    expect(out).to.include('  etcd                not used (vLLM/SGLang engines come from the engines file; directory --etcd_addr=)');
  });

  it('E15 --engine_kind=vllm --engines_dns --demo_only: engines at 127.0.0.x behind a local dnsmasq join and leave the directory as the hosts file changes', async () => {
    // One DNS name is one model's fleet: no second model, the adapter's chat still runs.
    const out = await demoOnly(['--engine_kind=vllm', '--engines_dns'], ['dns', 'directory', 'meta', 'engine-0', 'engine-1', 'engine-2', 'engine-3', 'router'], false);
    const text = out.join('\n');
    expect(out, text).to.include('[dns] now: the directory lists 3 engines from dns:vllm.kv-stack.test');
    const port = /^ {4}127\.0\.0\.2:(\d+) /m.exec(text)?.[1];
    expect(port, text).to.not.equal(undefined);
    expect(text).to.match(new RegExp(`^\\[dns\\] 127\\.0\\.0\\.5:${port} joined after \\d+ ms: the directory lists 4 engines from dns:vllm\\.kv-stack\\.test$`, 'm'));
    expect(text).to.match(new RegExp(`^\\[dns\\] 127\\.0\\.0\\.2:${port} left after \\d+ ms: the directory lists 3 engines from dns:vllm\\.kv-stack\\.test$`, 'm'));
    const last = out.slice(out.findIndex((l) => l.includes(' left after ')) + 1, out.findIndex((l) => l.includes(' left after ')) + 4).map((l) => l.trim().split(/\s+/)[0]);
    expect(last).to.deep.equal([`127.0.0.3:${port}`, `127.0.0.4:${port}`, `127.0.0.5:${port}`]);
  });

  it('SIGTERM while running stops every process it started and exits 0; meta-svc serves the KVCM API beside the directory', async () => {
    const { args, routerPort, metaPort } = await freePortFlags();
    const stack = spawnStack(['--demo=false', ...args]);
    await stack.waitForOutput(/^\[stack\] running; Ctrl-C stops everything$/, STACK_RUN_MS);
    expect(stack.output).to.include(`[stack] router ready at http://127.0.0.1:${routerPort}`);
    const health = await fetch(`http://127.0.0.1:${metaPort}/health`);
    expect(await health.json()).to.deep.equal({ status: 'ok' });
    const info = (await (await fetch(`http://127.0.0.1:${metaPort}/api/getClusterInfo`, { method: 'POST', body: '{}' })).json()) as { header: { status: { code: string } } };
    expect(info.header.status.code).to.equal('OK');

    const exit = await stack.stop();
    expect(exit.code, stack.tail(50)).to.equal(0);
    expect(stack.output).to.include('[stack] stopped 9 processes');
    await expectNothingLeft(stack);
  });

  it('a port already taken fails at once with one message naming its flag, and starts nothing', async () => {
    const { args } = await freePortFlags();
    const routerPort = Number(args[0]!.split('=')[1]);
    const holder = ServiceProcess.spawn({
      name: 'port-holder',
      command: process.execPath,
      args: ['-e', `require('net').createServer().listen(${routerPort}, '127.0.0.1', () => console.log('listening'))`],
    });
    await holder.waitForOutput(/^listening$/);

    const stack = spawnStack(['--demo_only', ...args]);
    const exit = await stack.waitForExit(STACK_RUN_MS);
    expect(exit.code).to.equal(1);
    expect(stack.output).to.include(`[stack] port ${routerPort} (--router_port) is already in use: stop whatever holds it or choose another port with the flag`);
    expect(stack.output.filter((l) => l.startsWith('[stack] started'))).to.deep.equal([]);
  });
});
