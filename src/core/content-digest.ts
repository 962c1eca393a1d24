import { createHash, hash } from 'node:crypto';
import type { ConfigResource } from './resource.js';

/**
 * An order-independent digest of a set of objects: the XOR of a 128-bit digest per object (of
 * what a client receives of it: name, version, creation time), kept up to date one object at a
 * time, and rendered with the count as a version string. Equal sets give equal versions on every
 * replica, whatever order they were built in.
 */
export class ContentDigest {
  private readonly xor = new Uint32Array(4);
  private count = 0;

  /** A copy, to branch from without touching this one. */
  clone(): ContentDigest {
    const copy = new ContentDigest();
    copy.xor.set(this.xor);
    copy.count = this.count;
    return copy;
  }

  add(r: ConfigResource): void {
    this.toggle(r);
    this.count++;
  }

  remove(r: ConfigResource): void {
    this.toggle(r);
    this.count--;
  }

  /** `<32 hex digits>-<count>`. */
  version(): string {
    return `${Array.from(this.xor, (n) => n.toString(16).padStart(8, '0')).join('')}-${this.count}`;
  }

  private toggle(r: ConfigResource): void {
    const d = objectDigest(r);
    for (let i = 0; i < 4; i++) this.xor[i] = (this.xor[i] ?? 0) ^ (d[i] ?? 0);
  }
}

/**
 * Per object instance, its 128-bit digest (computed once), as four signed 32-bit words in a plain
 * array: small integers live in the array itself, where a typed array per object would cost an
 * ArrayBuffer and its backing store each (about 200 bytes more per object).
 */
const digests = new WeakMap<ConfigResource, readonly number[]>();

function objectDigest(r: ConfigResource): readonly number[] {
  let d = digests.get(r);
  if (d === undefined) {
    const bytes = hash(
      'md5',
      `${r.namespace}/${r.name}@${r.version}@${r.createTime.seconds}.${r.createTime.nanos}`,
      'buffer',
    );
    d = [bytes.readInt32LE(0), bytes.readInt32LE(4), bytes.readInt32LE(8), bytes.readInt32LE(12)];
    digests.set(r, d);
  }
  return d;
}

/**
 * A short content id: the first `length` characters (at most 43) of the base64url SHA-256 of
 * `data`. Equal input gives the same id on every replica and release; served versions and
 * revisions are built from it, so the algorithm and encoding must not change. Pure.
 */
export function shortDigest(data: string | Uint8Array, length: number): string {
  return createHash('sha256').update(data).digest('base64url').slice(0, length);
}

/**
 * {@link shortDigest} of `lines`, each followed by `\n`, in the order given (sort first for an
 * order-independent id). Pure.
 */
export function linesDigest(lines: Iterable<string>, length = 16): string {
  const h = createHash('sha256');
  for (const line of lines) h.update(`${line}\n`);
  return h.digest('base64url').slice(0, length);
}
