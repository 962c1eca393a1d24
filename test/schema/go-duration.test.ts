import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { formatDuration, parseGoDuration, type Duration } from '../../src/core/go-duration.js';

function parsed(text: string): Duration {
  const r = parseGoDuration(text);
  assert.ok(r.ok, `${text}: ${r.ok ? '' : r.reason}`);
  return r.duration;
}

function rejected(text: string): string {
  const r = parseGoDuration(text);
  assert.ok(!r.ok, `${text} should be rejected`);
  return r.reason;
}

describe('parseGoDuration', () => {
  test('reads every Go unit, including both spellings of micro', () => {
    assert.deepEqual(parsed('5m'), { seconds: 300, nanos: 0 });
    assert.deepEqual(parsed('8ms'), { seconds: 0, nanos: 8_000_000 });
    assert.deepEqual(parsed('2h'), { seconds: 7200, nanos: 0 });
    assert.deepEqual(parsed('300us'), { seconds: 0, nanos: 300_000 });
    assert.deepEqual(parsed('300\u00b5s'), { seconds: 0, nanos: 300_000 });
    assert.deepEqual(parsed('300\u03bcs'), { seconds: 0, nanos: 300_000 });
    assert.deepEqual(parsed('7ns'), { seconds: 0, nanos: 7 });
  });

  test('adds up compound durations and fractions of any unit', () => {
    assert.deepEqual(parsed('1h30m'), { seconds: 5400, nanos: 0 });
    assert.deepEqual(parsed('1.5h'), { seconds: 5400, nanos: 0 });
    assert.deepEqual(parsed('1.5s'), { seconds: 1, nanos: 500_000_000 });
    assert.deepEqual(parsed('.5s'), { seconds: 0, nanos: 500_000_000 });
    assert.deepEqual(parsed('1.s'), { seconds: 1, nanos: 0 });
    assert.deepEqual(parsed('1m0.25s'), { seconds: 60, nanos: 250_000_000 });
  });

  test('reads canonical proto3 JSON durations, which are Go durations too', () => {
    assert.deepEqual(parsed('5s'), { seconds: 5, nanos: 0 });
    assert.deepEqual(parsed('0.000000001s'), { seconds: 0, nanos: 1 });
    assert.deepEqual(parsed('1.000000001s'), { seconds: 1, nanos: 1 });
    assert.deepEqual(parsed('0.500s'), { seconds: 0, nanos: 500_000_000 });
  });

  test('keeps the sign on both seconds and nanos, and accepts a bare 0 with or without sign', () => {
    assert.deepEqual(parsed('-2s'), { seconds: -2, nanos: 0 });
    assert.deepEqual(parsed('-1.5s'), { seconds: -1, nanos: -500_000_000 });
    assert.deepEqual(parsed('+3ms'), { seconds: 0, nanos: 3_000_000 });
    assert.deepEqual(parsed('0'), { seconds: 0, nanos: 0 });
    assert.deepEqual(parsed('-0'), { seconds: 0, nanos: 0 });
  });

  test('drops digits beyond nanosecond precision as Go does', () => {
    assert.deepEqual(parsed('1.0000000001s'), { seconds: 1, nanos: 0 });
    assert.deepEqual(parsed('0.1234567891s'), { seconds: 0, nanos: 123_456_789 });
  });

  test('accepts exactly Go’s range of ±(2^63-1) nanoseconds and nothing beyond', () => {
    assert.deepEqual(parsed('2562047h47m16.854775807s'), { seconds: 9_223_372_036, nanos: 854_775_807 });
    assert.deepEqual(parsed('-2562047h47m16.854775808s'), { seconds: -9_223_372_036, nanos: -854_775_808 });
    assert.match(rejected('2562047h47m16.854775808s'), /out of range/);
    assert.match(rejected('9223372037s'), /out of range/);
    assert.match(rejected('99999999999999999999h'), /out of range/);
  });

  test('rejects text that is not a duration, saying why and showing examples', () => {
    assert.match(rejected('soon'), /^"soon" is not a valid duration: .*e\.g\. "5s"/);
    assert.match(rejected('5'), /unit is missing/);
    assert.match(rejected('00'), /unit is missing/);
    assert.match(rejected('5sec'), /unknown unit "sec"/);
    assert.match(rejected('1d'), /unknown unit "d"/);
    assert.match(rejected('5 s'), /unknown unit " s"/);
    assert.match(rejected(''), /empty/);
    assert.match(rejected('-'), /empty/);
    assert.match(rejected('.s'), /number is missing/);
    assert.match(rejected('s'), /number is missing/);
  });
});

describe('formatDuration', () => {
  test('prints 0, 3, 6 or 9 fractional digits like Go’s protojson', () => {
    assert.equal(formatDuration({ seconds: 5, nanos: 0 }), '5s');
    assert.equal(formatDuration({ seconds: 0, nanos: 0 }), '0s');
    assert.equal(formatDuration({ seconds: 0, nanos: 500_000_000 }), '0.500s');
    assert.equal(formatDuration({ seconds: 0, nanos: 1000 }), '0.000001s');
    assert.equal(formatDuration({ seconds: 1, nanos: 1 }), '1.000000001s');
    assert.equal(formatDuration({ seconds: 5400, nanos: 120_000 }), '5400.000120s');
  });

  test('prints one leading minus for negative durations, including those under a second', () => {
    assert.equal(formatDuration({ seconds: -1, nanos: -1 }), '-1.000000001s');
    assert.equal(formatDuration({ seconds: 0, nanos: -500_000_000 }), '-0.500s');
    assert.equal(formatDuration({ seconds: -2, nanos: 0 }), '-2s');
  });

  test('refuses durations protobuf does not allow, with a DECODE error', () => {
    for (const bad of [
      { seconds: 1, nanos: -1 },
      { seconds: 315_576_000_001, nanos: 0 },
      { seconds: 0, nanos: 1_000_000_000 },
    ]) {
      assert.throws(
        () => formatDuration(bad),
        (err: unknown) => err instanceof MeshmuxError && err.code === 'DECODE',
      );
    }
  });

  test('round-trips with the parser', () => {
    for (const text of ['0s', '1s', '0.001s', '-0.000000001s', '86400.500s', '9223372036.854775807s']) {
      assert.equal(formatDuration(parsed(text)), text);
    }
  });
});
