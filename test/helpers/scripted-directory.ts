/**
 * A KvDirectory gRPC server (proto/kvdirectory.proto over real grpc-js) whose WatchView calls are
 * handed to the test to script: the router's ViewClient connects to it as to a directory, and the
 * test writes the snapshots, deltas and heartbeats it wants the router to see. Used where a test
 * needs a view the real directory cannot produce yet (or a fault it would not make).
 */
import * as grpc from '@grpc/grpc-js';
import { kvDirectoryServiceConstructor } from '../../shared/view/kvdirectory-proto.js';
import type { WireViewUpdate, WireWatchViewRequest } from '../../shared/view/view-wire.js';

export type WatchCall = grpc.ServerWritableStream<WireWatchViewRequest, WireViewUpdate>;

export interface Watch {
  readonly req: WireWatchViewRequest;
  readonly token: string | null;
  readonly call: WatchCall;
}

/** A KvDirectory server whose WatchView calls are handed to the test to script. */
export class ScriptedDirectory {
  readonly watches: Watch[] = [];
  private waiters: ((w: Watch) => void)[] = [];

  private constructor(
    private readonly server: grpc.Server,
    readonly port: number,
  ) {}

  static async start(): Promise<ScriptedDirectory> {
    const server = new grpc.Server();
    let self: ScriptedDirectory | null = null;
    const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<unknown>): void => cb({ code: grpc.status.UNIMPLEMENTED, details: 'test server' });
    server.addService(kvDirectoryServiceConstructor().service, {
      Query: unimplemented,
      ListStreams: unimplemented,
      GetStats: unimplemented,
      ListInstances: unimplemented,
      WatchView: (call: WatchCall) => {
        const token = call.metadata.get('x-internal-token')[0];
        const w: Watch = { req: call.request, token: token === undefined ? null : String(token), call };
        call.on('error', () => undefined); // a cancelled call: nothing to do
        self!.watches.push(w);
        const waiter = self!.waiters.shift();
        if (waiter) waiter(w);
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    self = new ScriptedDirectory(server, port);
    return self;
  }

  get address(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.port };
  }

  /** The next WatchView call (or the oldest one not yet taken). */
  nextWatch(): Promise<Watch> {
    const taken = this.taken++;
    if (taken < this.watches.length) return Promise.resolve(this.watches[taken]!);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private taken = 0;

  stop(): void {
    this.server.forceShutdown();
  }
}

export function send(w: Watch, u: WireViewUpdate): void {
  w.call.write(u);
}

