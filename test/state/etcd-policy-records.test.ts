/**
 * The replicas' policy records in a real etcd (Debian package `etcd-server`; skipped without it):
 * a record larger than etcd takes is written trimmed, under one lease however often it is written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import { EtcdPolicyRecords } from '../../src/state/etcd-policy-records.js';
import type { PolicyRecord } from '../../src/state/policy-record.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { suiteSkip } from '../support/required-peer.js';

const log = pino({ level: 'silent' });

describe('EtcdPolicyRecords, with a real etcd', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let client: Etcd3;

  before(async () => {
    etcd = await EtcdServer.start();
    client = new Etcd3({ hosts: etcd.endpoint });
  });
  after(async () => {
    client.close();
    await etcd.dispose();
  });

  it('writes a record of istiods with large metadata trimmed to what etcd takes, newest seen first', async () => {
    const records = EtcdPolicyRecords.open({
      client,
      prefix: '/large/',
      identity: 'replica-a',
      log,
      onRecord: () => undefined,
    });
    // 30 istiods of some 60 KB of metadata each: 1.8 MB, over etcd's 1.5 MiB request limit.
    const record: PolicyRecord = {
      savedAt: new Date().toISOString(),
      policies: [],
      clients: Array.from({ length: 30 }, (_, i) => ({
        nodeId: `istiod-${i}`,
        peer: `10.0.0.${i}:4000`,
        metadata: { LABELS: 'x'.repeat(60_000) },
        sans: [],
        seenAtMs: 1_000 + i,
      })),
    };
    const leases = async (): Promise<number> => (await client.leaseClient.leaseLeases()).leases.length;
    const leasesBefore = await leases();
    for (let i = 0; i < 5; i++) {
      records.write({ ...record, savedAt: new Date(Date.now() + i).toISOString() });
      await records.flushed();
    }
    const stored = await records.readAll(5_000);
    assert.equal(stored.length, 1, 'the record is in etcd');
    const clients = stored[0]?.record.clients ?? [];
    assert.ok(clients.length > 0 && clients.length < 30, `${clients.length} istiods kept`);
    assert.equal(clients[0]?.nodeId, 'istiod-29', 'the istiod seen last first');
    assert.equal((await leases()) - leasesBefore, 1, 'one lease for all the writes');
    await records.close();
  });
});
