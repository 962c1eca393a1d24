import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isCredentialName, redactSecrets } from '../../src/core/secrets.js';

describe('secrets in text from outside', () => {
  it('names a parameter a credential whatever its case and separators', () => {
    for (const name of [
      'token',
      'Token',
      'password',
      'passwd',
      'secret',
      'accesskey',
      'access_key',
      'Access-Key',
    ])
      assert.ok(isCredentialName(name), name);
    for (const name of ['credential', 'signature', 'db.password', 'authToken', 'api-key', 'private_key'])
      assert.ok(isCredentialName(name), name);
    for (const name of ['version', 'side', 'application', 'methods', 'weight', 'group', 'timeout'])
      assert.ok(!isCredentialName(name), name);
  });

  it('hides the userinfo of a URL and keeps the rest', () => {
    assert.equal(
      redactSecrets('cannot fetch https://deploy:ghp_abc123@git.example.com/mesh.git: timeout'),
      'cannot fetch https://***@git.example.com/mesh.git: timeout',
    );
    assert.equal(redactSecrets('dubbo://admin@10.0.0.1:20880/x'), 'dubbo://***@10.0.0.1:20880/x');
  });

  it('hides the userinfo of a percent-encoded URL, as a Dubbo provider node is named', () => {
    const node = encodeURIComponent('dubbo://admin:hunter2@10.0.0.1:20880/com.acme.Cart?side=provider');
    const out = redactSecrets(`provider node ${node} is not a URL`);
    assert.ok(!out.includes('hunter2'), out);
    assert.ok(out.includes('dubbo%3A%2F%2F***%4010.0.0.1%3A20880'), out);
  });

  it('hides the value of credential query parameters, plain, HTML-escaped and percent-encoded', () => {
    assert.equal(
      redactSecrets('dubbo://10.0.0.1:20880/x?side=provider&token=s3cr3t&version=1'),
      'dubbo://10.0.0.1:20880/x?side=provider&token=***&version=1',
    );
    assert.equal(
      redactSecrets('<td>x?a=1&amp;password=pw&amp;b=2</td>'),
      '<td>x?a=1&amp;password=***&amp;b=2</td>',
    );
    const encoded = encodeURIComponent('dubbo://10.0.0.1:20880/x?access_key=AKIA42&side=provider');
    const out = redactSecrets(encoded);
    assert.ok(!out.includes('AKIA42'), out);
    assert.ok(out.includes('side%3Dprovider'), out);
  });

  it('leaves text without secrets unchanged', () => {
    for (const text of [
      'plain text',
      '{"msg":"state read","objects":3}',
      'https://git.example.com/mesh.git?ref=main',
      'meshmux_source_state{source="a",state="synced"} 1',
      'user@example.com wrote',
    ])
      assert.equal(redactSecrets(text), text);
  });

  it('hides every secret of a JSON log line, however many', () => {
    const line = JSON.stringify({
      msg: 'rejected',
      url: 'https://a:b@h/r',
      node: 'zk://h/p?token=t1&x=1',
      err: 'see git://u:p@h2/r and ?password=p2',
    });
    const out = redactSecrets(line);
    for (const secret of ['a:b', 't1', 'u:p', 'p2']) assert.ok(!out.includes(secret), `${secret} in ${out}`);
    assert.doesNotThrow(() => JSON.parse(out), 'still a JSON line');
  });
});
