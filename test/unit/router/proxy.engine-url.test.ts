// engines.md §4 / routing.md proxy: an engines-file instance is forwarded to its `url` (with any
// path prefix and its host as Host), an etcd instance to http://<name>; over real HTTP sockets.
import { expect } from 'chai';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { UpstreamForwarder, type ForwardResult } from '../../../router-svc/proxy/upstream-forwarder.js';

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

describe('router proxy: forwarding to an engine url (engines.md §4)', () => {
  const servers: Server[] = [];
  const forwarder = new UpstreamForwarder();
  after(async () => {
    forwarder.close();
    for (const s of servers) await new Promise((r) => s.close(r));
  });

  async function through(baseUrl: (enginePort: number) => string, name: (enginePort: number) => string): Promise<{ seen: { url: string; host: string; body: string }; result: ForwardResult; answer: string }> {
    let seen = { url: '', host: '', body: '' };
    const engine = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        seen = { url: req.url ?? '', host: req.headers.host ?? '', body };
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    servers.push(engine);
    const enginePort = await listen(engine);
    let forwarded: Promise<ForwardResult> | null = null;
    const front = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        forwarded = forwarder.forward(name(enginePort), req.url ?? '/', req, res, Buffer.concat(chunks), baseUrl(enginePort));
      });
    });
    servers.push(front);
    const frontPort = await listen(front);
    const res = await fetch(`http://127.0.0.1:${frontPort}/v1/completions?x=1`, { method: 'POST', body: '{"prompt":[1,2]}' });
    const answer = await res.text();
    return { seen, result: await forwarded!, answer };
  }

  it('E11 an engines-file url with a path prefix: <url><path>, Host from the url, body unchanged', async () => {
    const r = await through((p) => `http://127.0.0.1:${p}/vllm`, () => 'vllm-0');
    expect(r.seen.url).to.equal('/vllm/v1/completions?x=1');
    expect(r.seen.host).to.match(/^127\.0\.0\.1:\d+$/);
    expect(r.seen.body).to.equal('{"prompt":[1,2]}');
    expect(r.answer).to.equal('{"ok":true}');
    expect(r.result).to.deep.equal({ kind: 'ok', status: 200 });
  });

  it('an empty url forwards to http://<name> as before', async () => {
    const r = await through(() => '', (p) => `127.0.0.1:${p}`);
    expect(r.seen.url).to.equal('/v1/completions?x=1');
    expect(r.result.kind).to.equal('ok');
  });
});
