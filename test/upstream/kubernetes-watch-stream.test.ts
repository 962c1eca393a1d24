/**
 * The Kubernetes source's own watch reader: a watch whose connection goes silent is opened again
 * from its last resourceVersion, each watch asks the server to end it in 5 to 10 minutes, and
 * event lines are split with a bound on their length.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LineSplitter } from '../../src/upstream/kubernetes/watch-stream.js';
import type { FakeKubeApiServer } from '../support/fake-kube-apiserver.js';
import {
  cartApiServer,
  cartSource,
  kubeconfigFor,
  names,
  putDestinationRule,
  vs,
} from '../support/kubernetes-cart.js';
import type { SourceEventRecorder } from '../support/source-event-recorder.js';
import { TcpProxy } from '../support/tcp-proxy.js';

describe('Kubernetes source, a watch whose connection goes silent', () => {
  let api: FakeKubeApiServer;
  let proxy: TcpProxy;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    api = await cartApiServer();
    proxy = await TcpProxy.start(Number(new URL(api.url).port));
  });
  after(async () => {
    recorder?.close();
    proxy.resume();
    await proxy.close();
    await api.stop();
  });

  it('opens it again from its last resourceVersion once it brought nothing for the idle deadline', async () => {
    // The source reaches the API server through the proxy; 1.5 s of silence is the deadline here.
    const events = await cartSource(api, {
      kubeconfig: await kubeconfigFor(`http://127.0.0.1:${proxy.port}`),
      watchIdleMs: 1_500,
    });
    recorder = events;
    await events.snapshot();
    // The first state can come before both watches are answered: one seen delivering proves it
    // open, where one still waiting for its response headers is bounded by the request deadline.
    api.put(vs('shop', 'before-freeze'));
    putDestinationRule(api, 'shop', 'before-freeze');
    await events.next(
      (e) => e.type === 'snapshot' && names(e).filter((n) => n === 'shop/before-freeze').length === 2,
    );
    const watches = api.requests.filter((r) => r.includes('watch=')).length;
    // The open watches freeze (a load balancer's leg gone silent); new connections still flow.
    proxy.pause({ newConnections: 'flow' });
    const marker = events.count;
    api.put(vs('shop', 'after-freeze'));
    putDestinationRule(api, 'shop', 'after-freeze');
    const got = await events.next(
      (e) => e.type === 'snapshot' && names(e).filter((n) => n === 'shop/after-freeze').length === 2,
      marker,
      30_000,
    );
    assert.ok(got.type === 'snapshot');
    const since = api.requests.filter((r) => r.includes('watch=')).slice(watches);
    assert.ok(since.length >= 2, `${since.length} watches opened again`);
    // From where the frozen ones were, not from a new list.
    assert.ok(
      since.every((r) => !/resourceVersion=(&|$)/.test(r)),
      since.join('\n'),
    );
    // Each watch asks the server to end it within 5 to 10 minutes, as client-go does.
    for (const r of api.requests.filter((q) => q.includes('watch='))) {
      const seconds = Number(/timeoutSeconds=(\d+)/.exec(r)?.[1]);
      assert.ok(seconds >= 300 && seconds <= 600, `${r}: timeoutSeconds=${seconds}`);
    }
  });
});

describe('LineSplitter', () => {
  it('splits lines across chunks and decodes a character split between them', () => {
    const splitter = new LineSplitter(64);
    const bytes = Buffer.from('{"a":"é"}\n{"b":1}\n{"c"', 'utf8');
    const at = bytes.indexOf(0xa9); // the second byte of é
    assert.deepEqual(splitter.push(bytes.subarray(0, at)), []);
    assert.deepEqual(splitter.push(bytes.subarray(at)), ['{"a":"é"}', '{"b":1}']);
    assert.deepEqual(splitter.push(Buffer.from(':2}\n')), ['{"c":2}']);
  });

  it('refuses a line longer than its bound, in one chunk or many', () => {
    assert.equal(new LineSplitter(8).push(Buffer.from('123456789\n')), undefined);
    const splitter = new LineSplitter(8);
    assert.deepEqual(splitter.push(Buffer.from('12345')), []);
    assert.equal(splitter.push(Buffer.from('6789')), undefined);
    assert.deepEqual(new LineSplitter(8).push(Buffer.from('12345678\n')), ['12345678']);
  });
});
