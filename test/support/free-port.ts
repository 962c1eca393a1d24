import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nobody listened on a moment ago. The probe listener is closed
 * before the port is returned, so another process may take it in between: use it only where a
 * fixed port must be named up front (a restart on the same address, a daemon without port 0).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Runs `start` on a port from {@link freePort}, and again on a new one if it fails, up to
 * `attempts` times: the way to close the race above for a peer that cannot listen on port 0 (a
 * daemon that exits, or never gets ready, because another process took its port in between).
 * The last failure is thrown, naming every port tried.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>, attempts = 3): Promise<T> {
  const tried: number[] = [];
  for (;;) {
    const port = await freePort();
    tried.push(port);
    try {
      return await start(port);
    } catch (err) {
      if (tried.length >= attempts)
        throw new Error(`could not start on ports ${tried.join(', ')}: ${String(err)}`, { cause: err });
    }
  }
}

/**
 * A listener on 127.0.0.1 that closes every connection as soon as it is accepted: a peer that
 * fails at once, on a port the test owns. Port 9 or any other well-known "nothing listens here"
 * port is not that: on some machines a discard service accepts there and never answers, and a
 * client then waits for its own timeout instead of failing.
 */
export function closingPort(): Promise<{ port: number; close: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.destroy());
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      resolve({ port, close: () => new Promise((done) => server.close(() => done())) });
    });
  });
}
