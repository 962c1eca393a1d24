import { createHash, hash } from 'node:crypto';
import { CONTENT_VERSION_LENGTH, type ConfigResource } from './resource.js';

/**
 * An order-independent digest of a set of objects: the XOR of a 128-bit digest per object (of
 * what a client receives of it: name, version, creation time), kept up to date one object at a
 * time, and rendered with the count as a version string. Equal sets give equal versions on every
 * replica, whatever order they were built in.
 */
export class ContentDigest {
  private readonly xor = new Uint32Array(4);
  private count = 0;

  /**
   * `withCreateTime` false: objects are digested by name and version alone, for a source's
   * revision of objects whose creation time is its own clock's (the same objects then have the
   * same revision on every replica and after every restart).
   */
  constructor(private readonly withCreateTime = true) {}

  /** A copy, to branch from without touching this one. */
  clone(): ContentDigest {
    const copy = new ContentDigest(this.withCreateTime);
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
    if (toggleByVersion(this.xor, r, this.withCreateTime)) return;
    const d = this.withCreateTime ? objectDigest(r) : nameDigest(r);
    for (let i = 0; i < 4; i++) this.xor[i] = (this.xor[i] ?? 0) ^ (d[i] ?? 0);
  }
}

/** The value of each base64url digit, by character code (-1: not a digit). */
const DIGITS = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'].entries()) {
  DIGITS[c.charCodeAt(0)] = i;
}

/**
 * Toggles the digest of an object whose version is a content version: its 120 bits, which already
 * name the object (its namespace and name are hashed into them), in four words of 30, each mixed
 * with the creation time (or with nothing, `withCreateTime` false). Computed on every toggle, nothing kept per object: a few dozen integer
 * operations cost less than looking a kept digest up, and nothing per object is memory and work
 * for every marking of the heap. False, nothing done, for any other version (the caller hashes it).
 */
function toggleByVersion(xor: Uint32Array, r: ConfigResource, withCreateTime: boolean): boolean {
  const v = r.version;
  if (v.length !== CONTENT_VERSION_LENGTH) return false;
  const words = WORDS;
  for (let w = 0; w < 4; w++) {
    let word = 0;
    for (let j = w * 5; j < w * 5 + 5; j++) {
      const c = v.charCodeAt(j);
      const digit = c < 128 ? (DIGITS[c] ?? -1) : -1;
      if (digit < 0) return false;
      word = (word << 6) | digit;
    }
    words[w] = word;
  }
  const time = withCreateTime ? timeWord(r.createTime.seconds, r.createTime.nanos) : 0;
  for (let w = 0; w < 4; w++) {
    // fmix32 is a bijection: for one creation time, distinct versions give distinct words.
    xor[w] = (xor[w] ?? 0) ^ fmix32((words[w] ?? 0) ^ fmix32(time + Math.imul(w + 1, 0x9e3779b9)));
  }
  return true;
}

const WORDS = new Int32Array(4);

/** A 32-bit word of a creation time (seconds up to 2^53 either side of the epoch, nanoseconds). */
function timeWord(seconds: number, nanos: number): number {
  const high = Math.floor(seconds / 0x100000000) | 0;
  return fmix32((seconds | 0) ^ fmix32(high ^ Math.imul(nanos, 0x27d4eb2d)));
}

/** MurmurHash3's 32-bit finalizer: every input bit moves every output bit. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Per object instance whose version is not a content version (objects built by hand, in tests),
 * its 128-bit digest (computed once), as four signed 32-bit words in a plain array.
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

/** The digest of an object by name and version alone (its version not a content version). */
function nameDigest(r: ConfigResource): readonly number[] {
  const bytes = hash('md5', `${r.namespace}/${r.name}@${r.version}`, 'buffer');
  return [bytes.readInt32LE(0), bytes.readInt32LE(4), bytes.readInt32LE(8), bytes.readInt32LE(12)];
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
  // One text hashed in one call: a hash update per line costs more than the join.
  const list = Array.isArray(lines) ? (lines as readonly string[]) : [...lines];
  return shortDigest(list.length === 0 ? '' : `${list.join('\n')}\n`, length);
}
