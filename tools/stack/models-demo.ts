/**
 * The mixed-fleet part of the stack's demo (cache-identity §1, §2, §5): the router lists every
 * model its candidates serve, then a two-turn chat goes to the LoRA adapter and one to the second
 * base model. Each is tokenized with its model's tokenizer (the router's `--models_file`; an
 * adapter uses its parent's), lands only on engines serving it, and its second turn is credited on
 * the engine holding the first. Before the adapter's first turn, `/v1/route` shows that the base
 * model's cached system prompt gives it nothing: blocks stored under an adapter are keyed by its
 * name, and base blocks never credit an adapter request.
 */
import { CHAT_SYSTEM, RouterClient, runChatDemo, waitFor, type ChatDemoTurn, type DemoOptions, type RouteAnswer } from './demo-workload.js';

export interface ModelsDemoOptions extends Omit<DemoOptions, 'model' | 'expectedStreams'> {
  /** The base model of the main fleet (its chat already ran). */
  readonly model: string;
  readonly adapter: string | null;
  readonly secondModel: string | null;
}

/** One chat of the models demo: which model, and its turns. */
export interface ModelChat {
  readonly model: string;
  readonly turns: readonly ChatDemoTurn[];
}

const QUESTIONS: Readonly<Record<'adapter' | 'second', readonly string[]>> = {
  adapter: ['Write a query counting the requests each engine served.', 'Now only for the last hour.'],
  second: ['Which engine holds this conversation?', 'And after one more turn?'],
};

export async function runModelsDemo(opts: ModelsDemoOptions): Promise<ModelChat[]> {
  const base = new RouterClient(opts.routerUrl, opts.internalApiToken, opts.model);
  const expected = [opts.model, ...(opts.adapter === null ? [] : [opts.adapter]), ...(opts.secondModel === null ? [] : [opts.secondModel])];
  let listed: { id: string; parent: string | null }[] = [];
  await waitFor(async () => {
    listed = await base.models();
    return expected.every((m) => listed.some((l) => l.id === m));
  }, `${expected.join(', ')} in the router's GET /v1/models`);
  opts.print(`[demo] the router lists ${listed.length} models (GET /v1/models): ${listed.map((m) => (m.parent === null ? m.id : `${m.id} (adapter of ${m.parent})`)).join(', ')}`);

  const width = Math.max(...expected.map((m) => m.length));
  const chats: ModelChat[] = [];
  const chat = async (model: string, questions: readonly string[]): Promise<void> => {
    const turns = await runChatDemo({ ...opts, model, expectedStreams: 0, questions, label: (turn) => `${model.padEnd(width)}  turn ${turn}` });
    chats.push({ model, turns });
  };
  if (opts.adapter !== null) {
    const adapter = new RouterClient(opts.routerUrl, opts.internalApiToken, opts.adapter);
    const first = [{ role: 'system', content: CHAT_SYSTEM }, { role: 'user', content: QUESTIONS.adapter[0]! }];
    const asBase = await base.routeBody({ messages: first });
    const asAdapter = await adapter.routeBody({ messages: first });
    opts.print(
      `[demo] ${opts.adapter}'s first turn as ${opts.model} would be credited ${bestHit(asBase)} tokens (the system prompt of the chat above); as ${opts.adapter} it gets ${bestHit(asAdapter)}: an adapter's blocks are keyed by its name`,
    );
    opts.print(`[demo] POST /v1/route for it explains the identity: ${identityLine(asAdapter)}`);
    await chat(opts.adapter, QUESTIONS.adapter);
  }
  if (opts.secondModel !== null) {
    opts.print(`[demo] a chat to ${opts.secondModel}: tokenized with its own tokenizer and sent only to its engine`);
    await chat(opts.secondModel, QUESTIONS.second);
  }
  return chats;
}

/** The most any prefill candidate holds of the request. */
function bestHit(a: RouteAnswer): number {
  return a.candidates.filter((c) => c.role === 'prefill').reduce((n, c) => Math.max(n, c.hit_tokens), 0);
}

function identityLine(a: RouteAnswer): string {
  const left = a.excluded_for_model.map((e) => `${e.instance_name} (${e.models.join(', ')})`).join(', ');
  return `model ${a.identity.model}, lora_name ${a.identity.lora_name}, salted ${a.identity.salted}; left out for serving another model: ${left === '' ? 'none' : left}`;
}
