import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import { KindTable, type SourceRank } from '../../src/merge/kind-table.js';
import { fakeResource } from '../support/resources.js';

const SE = 'networking.istio.io/ServiceEntry';
const LOW: SourceRank = { name: 'git', priority: 0, order: 0 };
const HIGH: SourceRank = { name: 'xds', priority: 5, order: 1 };

function entry(name: string, host: string | undefined): ConfigResource {
  return fakeResource(name, { kind: SE, namespace: 'shop', labels: host === undefined ? {} : { host } });
}

function table(): KindTable {
  let generation = 0;
  const hosts = (r: ConfigResource) => (r.labels['host'] === undefined ? [] : [r.labels['host']]);
  return new KindTable(
    SE,
    { type: 'service-entry-host', subjects: hosts },
    'highest-priority',
    () => ++generation,
  );
}

function state(...resources: ConfigResource[]): Map<string, ConfigResource> {
  return new Map(resources.map((r) => [`${r.namespace}/${r.name}`, r]));
}

function served(t: KindTable): string[] {
  return (t.snapshot()?.resources ?? []).map((r) => `${r.name}:${r.labels['host'] ?? '-'}`);
}

describe('a kind table serving only the highest priority of clashing objects', () => {
  it('serves an object again once it stops claiming a host a higher-priority source holds', () => {
    const t = table();
    const claiming = state(entry('legacy', 'api.example.com'));
    t.apply(LOW, new Map(), claiming);
    t.apply(HIGH, new Map(), state(entry('api', 'api.example.com')));
    assert.deepEqual(served(t), ['api:api.example.com'], 'the lower-priority claim is withheld');
    const hostless = state(entry('legacy', undefined));
    t.apply(LOW, claiming, hostless);
    assert.deepEqual(served(t), ['api:api.example.com', 'legacy:-']);
    const renamed = state(entry('legacy', 'legacy.example.com'));
    t.apply(LOW, hostless, renamed);
    assert.deepEqual(served(t), ['api:api.example.com', 'legacy:legacy.example.com']);
  });

  it('serves an object the source sends again after deleting it while it was withheld', () => {
    const t = table();
    const claiming = state(entry('legacy', 'api.example.com'));
    t.apply(LOW, new Map(), claiming);
    t.apply(HIGH, new Map(), state(entry('api', 'api.example.com')));
    t.apply(LOW, claiming, new Map());
    const back = state(entry('legacy', undefined));
    t.apply(LOW, new Map(), back);
    assert.deepEqual(served(t), ['api:api.example.com', 'legacy:-']);
  });
});
