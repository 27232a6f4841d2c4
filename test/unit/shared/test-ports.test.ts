// The tests' own port picking (test/helpers/ports.ts): a port checked free can still be taken
// before the child binds it, and concurrent picks must not share a port.
import { createServer, type Server } from 'node:net';
import { expect } from 'chai';
import { freePort, freePortRange, listenLoopback, startOnFreePorts } from '../../helpers/ports.js';

describe('test ports: picking and binding', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  async function listen(port: number): Promise<Server> {
    const server = createServer();
    servers.push(server);
    await listenLoopback(server, port);
    return server;
  }

  it('a start whose bind found its port taken is started again on newly picked ports', async () => {
    const taken = await freePort();
    await listen(taken);
    const tried: number[] = [];
    const bound = await startOnFreePorts(async () => {
      const port = tried.length === 0 ? taken : await freePort();
      tried.push(port);
      await listen(port);
      return port;
    });
    expect(tried).to.have.length(2);
    expect(tried[0]).to.equal(taken);
    expect(bound).to.equal(tried[1]).and.not.equal(taken);
  });

  it('any other failure is thrown at once, and a bind conflict after the last attempt is thrown', async () => {
    let calls = 0;
    const other = await startOnFreePorts(async () => {
      calls++;
      throw new Error('engine exited (code 1) before engine ready: bad flag --x');
    }).catch((e: Error) => e);
    expect(calls).to.equal(1);
    expect(String(other)).to.contain('bad flag');

    calls = 0;
    const taken = await freePort();
    await listen(taken);
    const conflict = await startOnFreePorts(async () => {
      calls++;
      await listen(taken);
    }, 2).catch((e: NodeJS.ErrnoException) => e);
    expect(calls).to.equal(2);
    expect((conflict as NodeJS.ErrnoException).code).to.equal('EADDRINUSE');
  });

  it('concurrent picks of port ranges never hand out the same port twice', async () => {
    const bases = await Promise.all(Array.from({ length: 24 }, () => freePortRange(3)));
    const ports = bases.flatMap((b) => [b, b + 1, b + 2]);
    expect(new Set(ports).size).to.equal(ports.length);
  });
});
