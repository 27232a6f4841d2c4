/**
 * One chat-template render thread (render-pool.ts): compiles the template once from workerData,
 * then renders each posted ChatRequest and posts back the text or the render error's message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ChatTemplate, TemplateRenderError } from './chat-template.js';
import type { ChatRequest } from './chat-request.js';

export interface RenderWorkerData {
  readonly source: string;
  readonly sourcePath: string;
  readonly config: Readonly<Record<string, unknown>>;
}

export type RenderReply = { readonly id: number; readonly text: string } | { readonly id: number; readonly error: string };

const data = workerData as RenderWorkerData;
const template = new ChatTemplate(data.source, data.sourcePath, data.config);
parentPort!.on('message', (m: { id: number; request: ChatRequest }) => {
  let reply: RenderReply;
  try {
    reply = { id: m.id, text: template.render(m.request) };
  } catch (e) {
    reply = { id: m.id, error: e instanceof TemplateRenderError ? e.message : `chat template failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  parentPort!.postMessage(reply);
});
