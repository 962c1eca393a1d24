/**
 * The order a snapshot reaches the streams in, through real gRPC streams of istiods: the clients
 * whose last responses weighed least are served first, so a change reaches the istiods of a small
 * view before HTTP/2 starts on the large responses of the others, whichever connected first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeResource, type ConfigResource } from '../../src/core/resource.js';
import { componentLogger } from '../../src/core/logger.js';
import { AdsServer } from '../../src/downstream/ads-server.js';
import { PolicySet } from '../../src/downstream/policy/policy-set.js';
import { KINDS } from '../../src/schema/kinds.js';
import { messageType } from '../../src/schema/proto-root.js';
import { until } from '../support/deadline.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startRig, VS, VS_URL, type Rig } from '../support/telemetry-rig.js';

const WAIT_MS = 15_000;
const VIRTUAL_SERVICE = messageType('istio.networking.v1alpha3.VirtualService');

/** A VirtualService of `namespace` whose body names `hosts` hosts (about 40 bytes each). */
function virtualService(namespace: string, name: string, hosts: number, gateway = 'mesh'): ConfigResource {
  const body = VIRTUAL_SERVICE.encode({
    hosts: Array.from({ length: hosts }, (_, i) => `${name}-${i}.${namespace}.svc.cluster.local`),
    gateways: [gateway],
  }).finish();
  return makeResource({
    kind: VS,
    namespace,
    name,
    labels: {},
    annotations: {},
    createTime: { seconds: 1_700_000_000, nanos: 0 },
    body,
    origin: {},
  });
}

/** 200 objects of `shop` (about 400 KB) and one of `ops`, whose gateway says which state this is. */
function state(gateway: string): ConfigResource[] {
  return [
    ...Array.from({ length: 200 }, (_, i) => virtualService('shop', `route-${i}`, 50)),
    virtualService('ops', 'admin', 1, gateway),
  ];
}

describe('a snapshot fanned out to the streams', () => {
  let rig: Rig;
  let ads: AdsServer;
  const clients: IstiodClient[] = [];
  /** The revision of each client a VirtualService response was pushed to, in order. */
  const pushes: string[] = [];

  const send = (gateway: string): Promise<unknown> =>
    rig.send('mesh', {
      type: 'snapshot',
      resources: state(gateway),
      revision: gateway,
      errors: [],
      warnings: [],
    });
  const holds = (c: IstiodClient, gateway: string): boolean =>
    JSON.stringify(c.configs(VS_URL).get('ops/admin')?.body['gateways']) === JSON.stringify([gateway]);

  before(async () => {
    rig = startRig(['mesh']);
    await send('first');
    ads = new AdsServer({
      reader: rig.engine,
      kinds: KINDS,
      log: componentLogger('ads'),
      policies: new PolicySet([
        { name: 'ops-only', match: { revision: 'small' }, allow: { namespaces: ['ops'] } },
        { name: 'everything' },
      ]),
      hooks: {
        onPush: (client, typeUrl) => {
          if (typeUrl === VS_URL) pushes.push(client.revision);
        },
      },
    });
    const port = await ads.listen('127.0.0.1:0');
    const connect = async (revision: string): Promise<void> => {
      const client = new IstiodClient({ address: `127.0.0.1:${port}`, revision }).start();
      clients.push(client);
      await client.waitForSync(WAIT_MS);
    };
    // The clients of the large view connect first: in connection order, they would be served first.
    await connect('large');
    await connect('large');
    await connect('small');
  });
  after(async () => {
    for (const c of clients) c.close();
    await ads.close();
    rig.stop();
  });

  it('reaches the clients of a small view before those of a large one that connected first', async () => {
    assert.equal(clients[0]?.configs(VS_URL).size, 201, 'the large view holds every object');
    assert.equal(clients[2]?.configs(VS_URL).size, 1, 'the small view holds the ops object only');
    await until(
      () => ads.reports().every((s) => s.types.every((t) => !t.awaitingAck)),
      WAIT_MS,
      'every response acknowledged',
    );
    pushes.length = 0;
    // The ops object changes: in both views.
    await send('second');
    await until(() => clients.every((c) => holds(c, 'second')), WAIT_MS, 'every istiod holding the change');
    assert.deepEqual(pushes, ['small', 'large', 'large']);
  });
});
