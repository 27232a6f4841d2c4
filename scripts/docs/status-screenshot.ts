/**
 * The status page screenshot in the docs (`docs/images/status-page.png`), taken the way an
 * operator would see it: the local stack (tools/stack.ts: etcd, five simulated engines, the
 * directory, meta-svc and a CAR router) on free ports runs its demo, then the same headless
 * Chromium the status-page test drives (test/helpers/headless-chromium.ts) loads the router's `GET /`
 * and waits until the page shows every instance and a hit-ratio point above zero. Before it loads
 * the page, a few seconds of repeated prompts through the proxy draw the hit-ratio chart.
 */
import { ServiceProcess } from '../../shared/process/service-process.js';
import { ensureChromium, HeadlessChromium } from '../../test/helpers/headless-chromium.js';
import { freePort } from '../../test/helpers/ports.js';

export const SCREENSHOT_FILE = 'docs/images/status-page.png';
const STACK_MS = 240000;
/** Traffic before the screenshot: prompts sharing prefixes, so the chart climbs as they get cached. */
const TRAFFIC_MS = 12000;
const TRAFFIC_INTERVAL_MS = 200;

/** Writes the screenshot to `path`; throws with the stack's output tail when something fails. */
export async function takeStatusScreenshot(root: string, path: string): Promise<void> {
  const found = ensureChromium();
  if (found.kind === 'missing') throw new Error(found.reason);
  const routerPort = await freePort();
  const args = [
    `--router_port=${routerPort}`,
    `--directory_grpc_port=${await freePort()}`,
    `--directory_http_port=${await freePort()}`,
    `--meta_port=${await freePort()}`,
    `--etcd_port=${await freePort()}`,
    `--etcd_peer_port=${await freePort()}`,
    '--engine_base_port=0',
  ];
  const stack = ServiceProcess.spawn({ name: 'stack', entry: 'tools/stack.ts', args, cwd: root });
  let browser: HeadlessChromium | null = null;
  try {
    // The demo has run once the stack prints where to curl.
    await stack.waitForOutput(/^Where to curl:/, STACK_MS);
    await sendTraffic(`http://127.0.0.1:${routerPort}`);
    browser = await HeadlessChromium.launch({ executable: found.path, width: 1280, height: 900 });
    await browser.goto(`http://127.0.0.1:${routerPort}/`);
    await browser.waitForFunction(`document.querySelectorAll('#instances tbody tr:not(.empty)').length >= 4`, 20000, 'four instances on the page');
    await browser.waitForFunction(`document.querySelectorAll('#streams tbody tr:not(.empty)').length >= 3`, 20000, 'three streams on the page');
    await browser.waitForFunction(`[...document.querySelectorAll('#hit-ratio-chart circle.point')].some((c) => Number(c.dataset.mean) > 0)`, 20000, 'a hit-ratio point above zero');
    await browser.screenshot(path, { fullPage: true });
  } finally {
    await browser?.close();
    await stack.stop();
  }
}

/** Completions of 6 prompts (3 shared prefixes × 2 suffixes) in turn, through the router's proxy. */
async function sendTraffic(routerUrl: string): Promise<void> {
  const prompts: number[][] = [];
  for (let p = 0; p < 3; p++) {
    for (let s = 0; s < 2; s++) prompts.push([...Array.from({ length: 48 }, (_, i) => 1000 + p * 100 + i), ...Array.from({ length: 16 }, (_, i) => 5000 + s * 50 + i)]);
  }
  const deadline = performance.now() + TRAFFIC_MS;
  for (let n = 0; performance.now() < deadline; n++) {
    const res = await fetch(`${routerUrl}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // The stack serves two base models (qwen3 and llama-3.1): a request names its model.
      body: JSON.stringify({ model: 'qwen3', prompt: prompts[n % prompts.length], max_tokens: 2 }),
    });
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, TRAFFIC_INTERVAL_MS));
  }
}
