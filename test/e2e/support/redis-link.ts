/**
 * A TCP link between an app and the shared test Redis that a test can cut and restore: the
 * store becomes unreachable (connections dropped, new ones refused at once) and comes back,
 * with its data intact, which stopping a redis-server would not keep. Real sockets both ways.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

export class RedisLink {
  private readonly sockets = new Set<Socket>();
  private cutOff = false;

  private constructor(
    private readonly server: Server,
    /** `redis://127.0.0.1:<port>`: give it to the app in place of the Redis URL. */
    readonly url: string,
  ) {}

  /** Listens on a free loopback port and forwards every connection to `target`. */
  static async open(target: string): Promise<RedisLink> {
    const { hostname, port } = new URL(target);
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const link = new RedisLink(
      server,
      `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    );
    server.on('connection', (client: Socket) => {
      if (link.cutOff) {
        client.destroy();
        return;
      }
      const upstream = createConnection({ host: hostname, port: Number(port) });
      for (const socket of [client, upstream]) {
        link.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          link.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    return link;
  }

  /** Drops every connection and refuses new ones until {@link RedisLink.restore}. */
  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    this.server.close();
    await once(this.server, 'close');
  }
}
