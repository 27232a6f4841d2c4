/**
 * The one command that runs the whole stack locally (`npm start`, i.e. `node dist/tools/stack.js`;
 * `node --import tsx tools/stack.ts` without a build): a local etcd (xLLM engines; a vLLM/SGLang
 * stack runs none), simulated engines (two DEFAULT and a PREFILL/DECODE pair serving `qwen3` and
 * its adapter `sql-lora`, and one DEFAULT engine serving `llama-3.1`, by default), directory-svc
 * with discovery and one router-svc with CAR and a `--models_file` naming each model's tokenizer.
 * Once the router is ready it sends the demo workload (tools/stack/demo-workload.ts), a chat to the
 * adapter and one to the second model (tools/stack/models-demo.ts), prints which engine served each
 * request with its hit tokens and where to curl, then runs until Ctrl-C / SIGTERM, on which it stops
 * every process it started. With `--engines_dns` the engines sit behind a local dnsmasq and the demo
 * adds and removes one (tools/stack/dns-demo.ts).
 *
 * Exit codes: 0 after a clean stop (and after `--demo_only`); 2 for a bad flag (one line on
 * stderr); 1 when a port is taken, a process fails to start, the demo fails or a child dies.
 */
import { configOrExit } from '../shared/process/service-main.js';
import { runChatDemo, runDemo, routeExample, type ChatDemoTurn, type DemoRequest, type RouteAnswer } from './stack/demo-workload.js';
import { runDnsDemo } from './stack/dns-demo.js';
import { runModelsDemo, type ModelChat } from './stack/models-demo.js';
import { LocalStack, TAIL_LINES } from './stack/local-stack.js';
import { parseStackArgs, stackHelp, usesEtcd, type StackConfig } from './stack/stack-flags.js';

const CHILD_WATCH_MS = 1000;

function print(line: string): void {
  process.stdout.write(line + '\n');
}

/** Streams the router serves --model's hits from: DEFAULT, PREFILL and MIX ranks (MIX starts as PREFILL) of its engines. */
function prefillStreams(cfg: StackConfig): number {
  return cfg.engines.filter((e) => e.type !== 'DECODE' && e.servedModels[0] === cfg.model).reduce((n, e) => n + e.dpSize, 0);
}

function printWhereToCurl(cfg: StackConfig, stack: LocalStack): void {
  const r = stack.routerUrl;
  const tokens = JSON.stringify(Array.from({ length: 2 * cfg.blockSize }, (_, k) => 1 + k));
  print('');
  print('Where to curl:');
  const model = JSON.stringify(cfg.model);
  print(`  ${`router (${cfg.loadBalancePolicy})`.padEnd(20)}${r}`);
  print(`    curl -s ${r}/v1/models`);
  print(`    curl -s ${r}/v1/internal/kv-cache/query -H 'content-type: application/json' -d '{"model":${model},"token_ids":${tokens}}'`);
  print(`    curl -s ${r}/v1/route -H 'content-type: application/json' -d '{"model":${model},"token_ids":${tokens}}'`);
  print(`    curl -s ${r}/v1/completions -H 'content-type: application/json' -d '{"model":${model},"prompt":${tokens},"max_tokens":8}' -i`);
  print(`    curl -s ${r}/v1/route -H 'content-type: application/json' -d '{"model":${model},"messages":[{"role":"user","content":"Hello!"}]}'`);
  print(`    curl -s ${r}/v1/chat/completions -H 'content-type: application/json' -d '{"model":${model},"messages":[{"role":"user","content":"Hello!"}],"max_tokens":8}' -i`);
  for (const other of [cfg.adapter, cfg.secondModel?.model ?? null]) {
    if (other === null) continue;
    print(`    curl -s ${r}/v1/route -H 'content-type: application/json' -d '{"model":${JSON.stringify(other)},"cache_salt":"tenant-a","messages":[{"role":"user","content":"Hello!"}]}'`);
  }
  print(`    curl -s ${r}/metrics ; curl -s ${r}/ready`);
  print(`  directory gRPC      127.0.0.1:${cfg.directoryGrpcPort}   (grpcurl -plaintext 127.0.0.1:${cfg.directoryGrpcPort} list)`);
  print(`  directory HTTP      http://127.0.0.1:${cfg.directoryHttpPort}/health  /metrics`);
  print(cfg.metaPort !== 0 ? `  meta-svc (KVCM)     http://127.0.0.1:${cfg.metaPort}/health  /metrics  /api/getClusterInfo` : '  meta-svc            disabled (--meta_port=0)');
  if (usesEtcd(cfg)) print(`  etcd                127.0.0.1:${cfg.etcdPort}   (etcdctl --endpoints=127.0.0.1:${cfg.etcdPort} get --prefix XLLM:)`);
  else print('  etcd                not used (vLLM/SGLang engines come from the engines file; directory --etcd_addr=)');
  const dns = stack.dns;
  if (dns !== null) print(`  dns                 ${dns.name} via dnsmasq ${dns.address}   (dig @127.0.0.1 -p ${dns.address.split(':')[1]} ${dns.name}; hosts file ${stack.runDir}/dns-hosts, kill -HUP ${stack.dnsPid})`);
  const listed = cfg.engineKind === 'xllm' ? '' : dns !== null ? `  ${cfg.engineKind}, found through ${dns.name}` : `  ${cfg.engineKind}, listed in ${stack.runDir}/engines.json`;
  for (const e of stack.engines) {
    const gone = dns !== null && !dns.addresses.includes(e.host) ? ' (address removed from DNS: not routed)' : '';
    print(`  engine ${e.type.padEnd(8)}     http://${e.host}:${e.httpPort}  dp_size ${e.dpSize}  serves ${e.servedModels.join(', ')}${listed}${gone}`);
  }
  if (cfg.internalApiToken !== '') print(`  internal endpoints need -H 'x-internal-token: ${cfg.internalApiToken}'`);
}

function printDemoSummary(results: readonly DemoRequest[]): void {
  const second = results.filter((r) => r.round > 1);
  const hits = second.filter((r) => r.hitTokens > 0).length;
  print(`[demo] round 2: ${hits} of ${second.length} prompts routed to an engine already holding them (hit > 0)`);
}

/** Later turns that landed on the engine of the turn before, with a non-zero credit. */
function creditedLaterTurns(turns: readonly ChatDemoTurn[]): { credited: number; later: number } {
  const later = turns.filter((t) => t.turn > 1);
  return { credited: later.filter((t, i) => t.hitTokens > 0 && t.engine === turns[i]!.engine).length, later: later.length };
}

function printChatSummary(turns: readonly ChatDemoTurn[]): void {
  const { credited, later } = creditedLaterTurns(turns);
  print(`[demo] chat: ${credited} of ${later} later turns landed on the engine holding the previous turn, credited with its prefix`);
}

/** Whether every models-demo chat's later turns were credited; prints one line per model. */
function printModelsSummary(chats: readonly ModelChat[]): boolean {
  let all = true;
  for (const c of chats) {
    const { credited, later } = creditedLaterTurns(c.turns);
    all &&= credited === later;
    print(`[demo] ${c.model}: ${credited} of ${later} later turns credited on ${c.turns[0]?.engine ?? '(none)'}, the engine holding the first`);
  }
  return all;
}

/** The decision's explanation, one candidate a line (routing.md: smallest score wins). */
function printRoute(route: RouteAnswer): void {
  print(`[demo] POST /v1/route for prompt 1 now: prefill ${route.prefill.name}${route.decode === null ? '' : `, decode ${route.decode.name}`}`);
  for (const c of route.candidates) {
    print(
      `    ${c.role.padEnd(8)} ${c.instance_name.padEnd(21)} hit_tokens ${String(c.hit_tokens).padStart(4)}  kv_hit_ratio ${c.kv_hit_ratio.toFixed(3)}  queue_cost ${c.queue_cost.toFixed(3)}  score ${c.score.toFixed(3)}`,
    );
  }
}

async function run(): Promise<void> {
  const cfg: StackConfig | 'help' = configOrExit(() => parseStackArgs(process.argv.slice(2)));
  if (cfg === 'help') {
    process.stdout.write(stackHelp());
    return;
  }
  const stack = new LocalStack(cfg, print);
  let stopping = false;
  const shutdown = async (reason: string, code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    print(`[stack] stopping (${reason})`);
    try {
      await stack.stop({ keepRunDir: code !== 0 });
    } catch (e) {
      console.error(`[stack] stop failed: ${e instanceof Error ? e.message : String(e)}`);
      code = 1;
    }
    process.exit(code);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown(signal, 0));

  try {
    await stack.start();
    if (cfg.demo) {
      print('[demo] two rounds of prompts sharing a system prefix, through the router\'s OpenAI proxy:');
      const results = await runDemo({
        routerUrl: stack.routerUrl,
        model: cfg.model,
        blockSize: cfg.blockSize,
        internalApiToken: cfg.internalApiToken,
        expectedStreams: prefillStreams(cfg),
        print,
      });
      printDemoSummary(results);
      printRoute(await routeExample({ routerUrl: stack.routerUrl, model: cfg.model, blockSize: cfg.blockSize, internalApiToken: cfg.internalApiToken }));
      if (cfg.demoOnly && !results.some((r) => r.round > 1 && r.hitTokens > 0)) throw new Error('demo: no second-round prompt got a cache hit');
      print(`[demo] a multi-turn ${cfg.model} chat as text through /v1/chat/completions, tokenized by the router (--models_file: ${cfg.model} → ${cfg.tokenizerDir}):`);
      const chat = await runChatDemo({ routerUrl: stack.routerUrl, model: cfg.model, blockSize: cfg.blockSize, internalApiToken: cfg.internalApiToken, expectedStreams: prefillStreams(cfg), print });
      printChatSummary(chat);
      if (cfg.demoOnly && !chat.some((t) => t.turn > 1 && t.hitTokens > 0)) throw new Error('demo: no later chat turn was credited with the earlier turns');
      if (cfg.adapter !== null || cfg.secondModel !== null) {
        const chats = await runModelsDemo({
          routerUrl: stack.routerUrl,
          model: cfg.model,
          adapter: cfg.adapter,
          secondModel: cfg.secondModel?.model ?? null,
          blockSize: cfg.blockSize,
          internalApiToken: cfg.internalApiToken,
          print,
        });
        if (!printModelsSummary(chats) && cfg.demoOnly) throw new Error('demo: a later turn of the adapter or second-model chat was not credited');
      }
      if (cfg.enginesDns) await runDnsDemo(stack, { directoryGrpcPort: cfg.directoryGrpcPort, internalApiToken: cfg.internalApiToken, print });
    }
  } catch (e) {
    if (stopping) return; // a signal arrived mid-start: shutdown() owns the exit
    console.error(`[stack] ${e instanceof Error ? e.message : String(e)}`);
    await shutdown('start or demo failed', 1);
    return;
  }
  printWhereToCurl(cfg, stack);
  if (cfg.demoOnly) {
    await shutdown('--demo_only done', 0);
    return;
  }
  print('');
  print('[stack] running; Ctrl-C stops everything');
  const watch = setInterval(() => {
    const dead = stack.exitedChild();
    if (dead === undefined || stopping) return;
    clearInterval(watch);
    console.error(`[stack] ${dead.name} exited (code ${dead.exit?.code}, signal ${dead.exit?.signal}); last lines:\n${dead.tail(TAIL_LINES)}`);
    void shutdown(`${dead.name} exited`, 1);
  }, CHILD_WATCH_MS);
}

void run();
