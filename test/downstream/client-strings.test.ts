import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { truncateForLog, truncateRecordForLog } from '../../src/core/truncate-for-log.js';
import { WarningLimiter } from '../../src/downstream/warning-limiter.js';

describe('client strings in logs', () => {
  it('keeps short strings whole and cuts long ones, saying how much was left out', () => {
    assert.equal(truncateForLog('sidecar~10.0.0.1~istiod'), 'sidecar~10.0.0.1~istiod');
    const cut = truncateForLog('x'.repeat(10_000), 256);
    assert.equal(cut, `${'x'.repeat(256)}… (9744 more characters)`);
  });

  it('bounds a metadata map: key count, keys, string values and nested values', () => {
    const metadata: Record<string, unknown> = {
      NOTE: 'n'.repeat(5_000),
      NESTED: { deep: 'd'.repeat(5_000) },
      N: 3,
    };
    for (let i = 0; i < 100; i++) metadata[`K${i}`] = 'v';
    const out = truncateRecordForLog(metadata);
    assert.ok(JSON.stringify(out).length < 2_000, JSON.stringify(out).slice(0, 100));
    assert.equal(out['N'], 3);
    assert.equal(out['…'], '71 more keys');
  });

  it('logs the first warning of a kind, then at most one per interval with the count left out', () => {
    let now = 0;
    const limiter = new WarningLimiter(() => now, 10_000);
    assert.deepEqual(limiter.allow('nack'), { log: true, suppressed: 0 });
    for (let i = 0; i < 5; i++) assert.equal(limiter.allow('nack').log, false);
    assert.deepEqual(limiter.allow('unknown-type'), { log: true, suppressed: 0 }, 'kinds are limited apart');
    now = 10_000;
    assert.deepEqual(limiter.allow('nack'), { log: true, suppressed: 5 });
  });
});
