import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isFullRun, type RunScope } from '../../bench/report.js';

const full: RunScope = { quick: false, slowClientsOnly: false, withBaselines: true, shapes: ['S', 'L'] };

describe('which benchmark runs rewrite the published results', () => {
  it('a run of both shapes with the baselines does', () => {
    assert.equal(isFullRun(full), true);
    assert.equal(isFullRun({ ...full, shapes: ['L', 'S'] }), true);
  });

  it('a run of one shape does not, with or without the baselines', () => {
    for (const shapes of [['S'], ['L'], []])
      for (const withBaselines of [true, false])
        assert.equal(
          isFullRun({ ...full, shapes, withBaselines }),
          false,
          `${shapes.join(',')} ${withBaselines}`,
        );
  });

  it('a quick run, a run without the baselines or of the stalled clients only does not', () => {
    assert.equal(isFullRun({ ...full, quick: true }), false);
    assert.equal(isFullRun({ ...full, withBaselines: false }), false);
    assert.equal(isFullRun({ ...full, slowClientsOnly: true }), false);
  });
});
