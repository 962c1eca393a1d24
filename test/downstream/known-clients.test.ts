import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { anonymousIdentity, withNode } from '../../src/downstream/client-identity.js';
import {
  KEEP_ABSENT_MS,
  KnownClients,
  MAX_KEPT_CHARS,
  MAX_KNOWN_CLIENTS,
  MAX_RECORD_BYTES,
} from '../../src/downstream/policy/known-clients.js';

let streams = 0;
/** A new stream of `node` (each call is another stream, as each redial is). */
const identity = (node: string, port = 5000) =>
  withNode(anonymousIdentity(++streams, `10.0.0.7:${port}`, []), node, {});
const START = 1_000_000;

describe('known clients', () => {
  it('takes in another record’s istiods, each as last seen when that record says or later', () => {
    const known = new KnownClients([], 0, START);
    const web = { nodeId: 'web-1', peer: '10.0.0.9:4000', metadata: {}, sans: [] };
    known.merge([{ ...web, seenAtMs: START + 5_000 }], START);
    // An older record of the same istiod (another replica's) does not age it.
    known.merge([web], START - 60_000);
    assert.deepEqual(
      known.toRecord().map((c) => [c.nodeId, c.seenAtMs]),
      [['web-1', START + 5_000]],
    );
    const before = known.membership;
    known.merge([{ nodeId: 'db-1', peer: '10.0.0.8:4000', metadata: {}, sans: [] }], START);
    assert.equal(known.membership, before + 1, 'a new istiod is a change of membership');
    known.observe([], START + 5_000 + KEEP_ABSENT_MS + 1);
    assert.deepEqual(known.identities(), [], 'each aged by its own time');
  });

  it('keeps a recorded istiod until it has been absent for a while of this process, however old the record', () => {
    // Recorded an hour before this process started (a long outage).
    const known = new KnownClients(
      [{ nodeId: 'web-1', peer: '10.0.0.9:4000', metadata: {}, sans: [] }],
      START - 3_600_000,
      START,
    );
    known.observe([identity('shop-1')], START + 1_000);
    assert.deepEqual(
      known
        .identities()
        .map((c) => c.nodeId)
        .sort(),
      ['shop-1', 'web-1'],
    );
    known.observe([identity('shop-1')], START + KEEP_ABSENT_MS - 1);
    assert.equal(known.identities().length, 2);
    known.observe([identity('shop-1')], START + KEEP_ABSENT_MS + 1);
    assert.deepEqual(
      known.identities().map((c) => c.nodeId),
      ['shop-1'],
    );
  });

  it('counts one istiod once whatever port it redials from, and moves its membership only when one comes or goes', () => {
    const known = new KnownClients([], START, START);
    known.observe([identity('shop-1', 5000)], START);
    const membership = known.membership;
    known.observe([identity('shop-1', 6000)], START + 10);
    assert.equal(known.identities().length, 1);
    assert.equal(known.membership, membership);
    assert.equal(known.toRecord()[0]?.seenAtMs, START + 10);
    known.observe([identity('shop-2')], START + 20);
    assert.notEqual(known.membership, membership);
  });

  it('keeps the most recently seen when there are more than it may keep', () => {
    const known = new KnownClients([], START, START);
    const many = Array.from({ length: MAX_KNOWN_CLIENTS + 5 }, (_, i) => identity(`n-${i}`));
    for (const [i, c] of many.entries()) known.observe([c], START + i);
    assert.equal(known.identities().length, MAX_KNOWN_CLIENTS);
    assert.ok(!known.identities().some((c) => c.nodeId === 'n-0'));
    assert.ok(known.identities().some((c) => c.nodeId === `n-${MAX_KNOWN_CLIENTS + 4}`));
  });
});

describe('known clients: what is kept of a claim', () => {
  it('keeps only what a policy can test, each part bounded, and judges a connected istiod on its whole claim', () => {
    const known = new KnownClients([], START, START);
    const metadata = {
      PAD: 'm'.repeat(60_000),
      LABELS: { app: 'shop' },
      CLUSTER_ID: 'east',
      ISTIO_REVISION: 'canary',
    };
    const live = withNode(anonymousIdentity(++streams, '10.0.0.7:5000', []), 'shop-1', metadata);
    known.observe([live], START);
    assert.deepEqual(known.toRecord()[0]?.metadata, { ISTIO_REVISION: 'canary', CLUSTER_ID: 'east' });
    assert.equal(known.identities([live])[0], live, 'a connected istiod as it claims itself');
    assert.deepEqual(known.identities()[0]?.metadata, { ISTIO_REVISION: 'canary', CLUSTER_ID: 'east' });
    assert.equal(known.identities()[0]?.revision, 'canary');
    // The same istiod recorded by another replica, its metadata in another order, is one identity.
    const membership = known.membership;
    known.merge(
      [
        {
          nodeId: 'shop-1',
          peer: '10.0.0.7:6000',
          metadata: { CLUSTER_ID: 'east', ISTIO_REVISION: 'canary' },
          sans: [],
        },
      ],
      START + 2,
    );
    assert.equal(known.membership, membership);
    assert.equal(known.identities().length, 1);
  });

  it('keeps its record within its bytes, the most recently seen first', () => {
    const known = new KnownClients([], START, START);
    const many = Array.from({ length: MAX_KNOWN_CLIENTS }, (_, i) =>
      withNode(anonymousIdentity(++streams, '10.0.0.7:5000', []), `n-${i}-${'x'.repeat(MAX_KEPT_CHARS)}`, {
        ...Object.fromEntries(
          Array.from({ length: 16 }, (_, k) => [`K${k}`, 'v'.repeat(MAX_KEPT_CHARS - 3)]),
        ),
      }),
    );
    for (const [i, c] of many.entries()) known.observe([c], START + i);
    const record = known.toRecord();
    assert.ok(Buffer.byteLength(JSON.stringify(record)) <= MAX_RECORD_BYTES);
    assert.ok(record.length < MAX_KNOWN_CLIENTS && record.length > 0);
    assert.ok(record[0]?.nodeId.startsWith(`n-${MAX_KNOWN_CLIENTS - 1}-`), 'the last seen first');
    assert.equal(record[0]?.nodeId.length, MAX_KEPT_CHARS);
  });
});
