import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Subscription } from 'rxjs';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { XdsSource } from '../../src/upstream/xds/xds-source.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import type { FakeObject } from '../support/fake-objects.js';

// A full collection on demand, without starting the test process with --expose-gc.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const SE = 'networking.istio.io/ServiceEntry';

function serviceEntries(count: number, generation = 1): FakeObject[] {
  return Array.from({ length: count }, (_, i) => ({
    namespace: `ns-${i % 7}`,
    name: `svc-${i}`,
    spec: {
      hosts: [`svc-${i}.ns-${i % 7}.example.internal`],
      ports: [{ number: 8080, name: 'http', protocol: 'HTTP' }],
      resolution: 'STATIC',
      endpoints: [{ address: `10.0.${i % 250}.${generation}` }],
    },
  }));
}

/**
 * Holds only the last snapshot of a source (a recorder keeping every event would keep every
 * object alive), and resolves waits on it.
 */
class LastSnapshot {
  last: SourceSnapshotEvent | undefined;
  private readonly subscription: Subscription;
  private waiter: { check: (e: SourceSnapshotEvent) => boolean; resolve: () => void } | undefined;

  constructor(source: XdsSource) {
    this.subscription = source.events$.subscribe((e) => {
      if (e.type !== 'snapshot') return;
      this.last = e;
      if (this.waiter?.check(e) === true) {
        this.waiter.resolve();
        this.waiter = undefined;
      }
    });
  }

  /** Resolves once a snapshot holds `count` ServiceEntries. */
  serviceEntries(count: number): Promise<void> {
    return this.until(
      (e) => [...e.resources].filter((r) => r.kind === SE).length === count,
      `${count} ServiceEntries`,
    );
  }

  /** Resolves once a snapshot satisfies `check`; `what` names it in the timeout error. */
  until(check: (e: SourceSnapshotEvent) => boolean, what: string): Promise<void> {
    if (this.last !== undefined && check(this.last)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no snapshot with ${what} within 15 s`)), 15_000);
      this.waiter = {
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
    });
  }

  close(): void {
    this.subscription.unsubscribe();
  }
}

/** Weak references to the ServiceEntries of the last snapshot for which `pick` holds. */
function weakly(snapshot: LastSnapshot, pick: (r: ConfigResource) => boolean): WeakRef<ConfigResource>[] {
  return [...(snapshot.last?.resources ?? [])]
    .filter((r) => r.kind === SE && pick(r))
    .map((r) => new WeakRef(r));
}

/** How many of `refs` survive full collections (a WeakRef's target lives at least until the turn ends). */
async function survivors(refs: readonly WeakRef<object>[]): Promise<number> {
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return refs.filter((r) => r.deref() !== undefined).length;
}

describe('memory held by an xds source', () => {
  let fake: FakeAdsServer;
  let snapshot: LastSnapshot;
  /** The buffer the first state's objects lie in. */
  let firstState: WeakRef<ArrayBuffer> | undefined;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    fake.set('ServiceEntry', serviceEntries(1000));
    snapshot = new LastSnapshot(
      new XdsSource({
        name: 'upstream',
        namespace: 'default',
        address: fake.address,
        kinds: ['ServiceEntry'],
        reconnect: { initialDelay: 50, maxDelay: 400 },
      }),
    );
    await snapshot.serviceEntries(1000);
  });
  after(async () => {
    snapshot.close();
    await fake.stop();
  });

  it('keeps the objects of a first state in the response they arrived in, their bytes held once', () => {
    const bodies = [...(snapshot.last?.resources ?? [])].filter((r) => r.kind === SE).map((r) => r.body);
    assert.equal(bodies.length, 1000);
    const buffers = new Set(bodies.map((b) => b.buffer));
    // The response, kept to tell what the next one changes, is where every object's bytes lie.
    assert.equal(buffers.size, 1, `${buffers.size} buffers hold the first state's bodies`);
    const buffer = [...buffers][0] as ArrayBuffer;
    // Its bytes from the first body to the end of the last are the response's entries, nearly
    // all of it: the transport's buffer has a sixteenth more room at most.
    const from = Math.min(...bodies.map((b) => b.byteOffset));
    const to = Math.max(...bodies.map((b) => b.byteOffset + b.byteLength));
    assert.ok(
      buffer.byteLength <= (to - from) * 1.1 + 1024,
      `a buffer of ${buffer.byteLength} bytes for bodies spread over ${to - from}`,
    );
    firstState = new WeakRef(buffer);
  });

  it('reads later objects into buffers of their own, and the first state stays as it was read', async () => {
    const first = [...(snapshot.last?.resources ?? [])].filter((r) => r.kind === SE);
    const copies = new Map(first.map((r) => [r, Buffer.from(r.body)]));
    const changed = serviceEntries(1000);
    changed.splice(0, 5, ...serviceEntries(5, 2));
    fake.set('ServiceEntry', changed).push();
    await snapshot.until(
      (e) => [...e.resources].filter((r) => r.kind === SE && !copies.has(r)).length === 5,
      'five changed ServiceEntries',
    );
    const now = [...(snapshot.last?.resources ?? [])].filter((r) => r.kind === SE);
    const read = now.filter((r) => !copies.has(r));
    assert.deepEqual(read.map((r) => r.name).sort(), ['svc-0', 'svc-1', 'svc-2', 'svc-3', 'svc-4']);
    for (const r of read) {
      assert.ok(
        r.body.buffer.byteLength < 4096,
        `${r.name}'s body lives in ${r.body.buffer.byteLength} bytes`,
      );
    }
    assert.equal(now.length - read.length, 995);
    for (const [r, bytes] of copies) assert.ok(Buffer.from(r.body).equals(bytes), `${r.name}'s body changed`);
  });

  it('lets go of the objects a full-state response removes', async () => {
    const removed = weakly(snapshot, (r) => Number(r.name.slice('svc-'.length)) >= 10);
    assert.equal(removed.length, 990);
    fake.set('ServiceEntry', serviceEntries(10)).push();
    await snapshot.serviceEntries(10);
    assert.equal(await survivors(removed), 0, 'removed objects still held after a full collection');
  });

  it('lets go of the previous version of each object a response changes', async () => {
    fake.set('ServiceEntry', serviceEntries(10, 1)).push();
    await snapshot.serviceEntries(10);
    const old = weakly(snapshot, () => true);
    fake.set('ServiceEntry', serviceEntries(10, 2)).push();
    await snapshot.until(
      (e) => [...e.resources].some((r) => r.kind === SE && !old.some((w) => w.deref() === r)),
      'the changed objects',
    );
    assert.equal(await survivors(old), 0, 'previous versions still held after a full collection');
    // No object of the first state is left: neither they nor a kept response hold its bytes.
    assert.equal(await survivors(firstState === undefined ? [] : [firstState]), 0, "the first state's bytes");
    assert.ok(firstState !== undefined);
  });
});
