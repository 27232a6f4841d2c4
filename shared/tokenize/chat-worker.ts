/**
 * One chat thread (chat-pool.ts): compiles the template and loads the tokenizer once from
 * workerData, then renders and encodes each posted ChatRequest (chat-encoding.ts) and posts back
 * the outcome, its ids as a transferred Uint32Array, with the thread's segment-cache and
 * template-engine counters.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ChatTemplate } from './chat-template.js';
import type { ChatRequest } from './chat-request.js';
import { renderAndEncode, type UntokenizedReason } from './chat-encoding.js';
import { TokenEncoder, type SegmentCacheStats } from './token-encoder.js';
import type { TemplateEngineInfo } from './shadow-checked-renderer.js';

export interface ChatWorkerData {
  readonly source: string;
  readonly sourcePath: string;
  readonly config: Readonly<Record<string, unknown>>;
  readonly tokenizerJson: string;
  readonly tokenizerPath: string;
  /** This thread's share of the segment-cache budget. */
  readonly cacheBytes: number;
  /** ChatTemplateOptions.compile. */
  readonly compileTemplate: boolean;
}

export interface ChatRequestMessage {
  readonly id: number;
  readonly request: ChatRequest;
}

/** The pool tells every thread when one found the compiled template wrong (shadow-checked-renderer.ts). */
export interface SwitchOffMessage {
  readonly switchOff: string;
}

/** With every reply: the thread's counters (its segment cache, its template engine). */
interface ThreadState {
  readonly cache: SegmentCacheStats;
  readonly engine: TemplateEngineInfo;
}

export type ChatReply =
  | ({ readonly id: number; readonly ids: Uint32Array } & ThreadState)
  | ({ readonly id: number; readonly reason: UntokenizedReason; readonly detail: string } & ThreadState);

const data = workerData as ChatWorkerData;
const template = new ChatTemplate(data.source, data.sourcePath, data.config, { compile: data.compileTemplate });
const encoder = TokenEncoder.fromJson(data.tokenizerJson, data.tokenizerPath, data.cacheBytes);

async function answer(m: ChatRequestMessage): Promise<void> {
  const outcome = await renderAndEncode(template, encoder, m.request);
  const state: ThreadState = { cache: encoder.cacheStats, engine: template.engine };
  if (!outcome.ok) {
    parentPort!.postMessage({ id: m.id, reason: outcome.reason, detail: outcome.detail, ...state } satisfies ChatReply);
    return;
  }
  parentPort!.postMessage({ id: m.id, ids: outcome.ids, ...state } satisfies ChatReply, [outcome.ids.buffer as ArrayBuffer]);
}

parentPort!.on('message', (m: ChatRequestMessage | SwitchOffMessage) => {
  if ('switchOff' in m) template.switchOff(m.switchOff);
  else void answer(m);
});
