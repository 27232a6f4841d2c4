/**
 * One chat thread (chat-pool.ts): compiles the template and loads the tokenizer once from
 * workerData, then renders and encodes each posted ChatRequest (chat-encoding.ts) and posts back
 * the outcome, its ids as a transferred Uint32Array, with the thread's segment-cache counters.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ChatTemplate } from './chat-template.js';
import type { ChatRequest } from './chat-request.js';
import { renderAndEncode, type UntokenizedReason } from './chat-encoding.js';
import { TokenEncoder, type SegmentCacheStats } from './token-encoder.js';

export interface ChatWorkerData {
  readonly source: string;
  readonly sourcePath: string;
  readonly config: Readonly<Record<string, unknown>>;
  readonly tokenizerJson: string;
  readonly tokenizerPath: string;
  /** This thread's share of the segment-cache budget. */
  readonly cacheBytes: number;
}

export interface ChatRequestMessage {
  readonly id: number;
  readonly request: ChatRequest;
}

export type ChatReply =
  | { readonly id: number; readonly ids: Uint32Array; readonly cache: SegmentCacheStats }
  | { readonly id: number; readonly reason: UntokenizedReason; readonly detail: string; readonly cache: SegmentCacheStats };

const data = workerData as ChatWorkerData;
const template = new ChatTemplate(data.source, data.sourcePath, data.config);
const encoder = TokenEncoder.fromJson(data.tokenizerJson, data.tokenizerPath, data.cacheBytes);

async function answer(m: ChatRequestMessage): Promise<void> {
  const outcome = await renderAndEncode(template, encoder, m.request);
  if (!outcome.ok) {
    parentPort!.postMessage({ id: m.id, reason: outcome.reason, detail: outcome.detail, cache: encoder.cacheStats } satisfies ChatReply);
    return;
  }
  parentPort!.postMessage({ id: m.id, ids: outcome.ids, cache: encoder.cacheStats } satisfies ChatReply, [outcome.ids.buffer as ArrayBuffer]);
}

parentPort!.on('message', (m: ChatRequestMessage) => void answer(m));
