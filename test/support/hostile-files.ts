/**
 * Inputs that once froze or killed meshmux, for tests that prove they no longer do: alias bombs,
 * huge files, bytes that are not UTF-8.
 */
import { open } from 'node:fs/promises';

/** A ServiceEntry named `name` whose field `x` expands through aliases to `width`^`depth` scalars. */
export function aliasBomb(name: string, width = 9, depth = 8): string {
  let text = `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ${name}, namespace: shop}\n`;
  text += `l0: &l0 [${Array<string>(width).fill('lol').join(', ')}]\n`;
  for (let l = 1; l <= depth; l++) {
    text += `l${l}: &l${l} [${Array<string>(width)
      .fill(`*l${l - 1}`)
      .join(', ')}]\n`;
  }
  return `${text}spec: {hosts: [${name}.example.com], x: *l${depth}}\n`;
}

/** A valid ServiceEntry in namespace `shop`. */
export function plainServiceEntry(name: string, host = `${name}.example.com`): string {
  return (
    `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ${name}, namespace: shop}\n` +
    `spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}\n`
  );
}

/**
 * Writes a YAML file of about `bytes` bytes (many ServiceEntries) in 1 MiB writes, so the test
 * process never holds it whole.
 */
export async function writeHugeYaml(file: string, bytes: number): Promise<void> {
  const handle = await open(file, 'w');
  try {
    let chunk = '';
    for (let i = 0; chunk.length < 1024 * 1024; i++) chunk += `---\n${plainServiceEntry(`bulk-${i}`)}`;
    for (let written = 0; written < bytes; written += chunk.length) await handle.write(chunk);
  } finally {
    await handle.close();
  }
}
