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
