import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withHistory } from '../../bench/report.js';

/** The part of a shape's summary the history reads: two goal figures. */
function summary(cpu: number, latency: number) {
  return { perChange: { cpuMsBeforeFirstByte: cpu }, latency: { isolatedSmallViewP50Ms: latency } };
}

type Summaries = Parameters<typeof withHistory>[2];
const shapes = (entries: Array<[string, ReturnType<typeof summary>]>) =>
  new Map(entries) as unknown as Summaries;

describe("the benchmark's results keep the ranges of recent full runs", () => {
  it('starts from this run alone when there is no earlier file', () => {
    const { runs, ranges } = withHistory(undefined, '2026-11-25', shapes([['S', summary(11, 15)]]));
    assert.equal(runs.length, 1);
    assert.deepEqual(ranges['S']?.['perChange.cpuMsBeforeFirstByte'], [11, 11]);
  });

  it('counts a file written before runs were kept as one run', () => {
    const old = { machine: { date: '2026-11-22' }, S: summary(30, 26), L: summary(90, 160) };
    const { runs, ranges } = withHistory(old, '2026-11-25', shapes([['S', summary(11, 15)]]));
    assert.deepEqual(
      runs.map((r) => r.date),
      ['2026-11-22', '2026-11-25'],
    );
    assert.deepEqual(ranges['S']?.['latency.isolatedSmallViewP50Ms'], [15, 26]);
    assert.deepEqual(ranges['L']?.['perChange.cpuMsBeforeFirstByte'], [90, 90]);
  });

  it('keeps the last seven runs and the lowest and highest figure over them', () => {
    let file: unknown;
    for (let day = 1; day <= 9; day++) {
      const { runs } = withHistory(file, `2026-12-0${day}`, shapes([['S', summary(day, 100 - day)]]));
      file = { history: { runs } };
    }
    const { runs, ranges } = withHistory(file, '2026-12-10', shapes([['S', summary(5, 50)]]));
    assert.equal(runs.length, 7);
    assert.equal(runs[0]?.date, '2026-12-04');
    assert.deepEqual(ranges['S']?.['perChange.cpuMsBeforeFirstByte'], [4, 9]);
    assert.deepEqual(ranges['S']?.['latency.isolatedSmallViewP50Ms'], [50, 96]);
  });
});
