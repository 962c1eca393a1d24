import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { versusBaseline } from '../../bench/report.js';

const churn = (latencyP99Ms: number) => ({ churn: { latencyP99Ms } });

describe("a baseline's churn latency is set against meshmux's under the same load", () => {
  it("divides by meshmux's p99 on the baseline's own fleet, and gives the full fleet's apart", () => {
    // meshmux: 300 ms on the baseline's 10 clients, 2400 ms on the full fleet; istiod-like: 3600 ms.
    const ratios = versusBaseline(churn(3600), { clients: 10, meshmux: churn(300) }, churn(2400));
    assert.deepEqual(ratios, { latencyP99: 12, latencyP99FullFleet: 1.5, clients: 10 });
  });

  it('does not read the full fleet into the goal figure', () => {
    const a = versusBaseline(churn(3600), { clients: 5, meshmux: churn(400) }, churn(100));
    const b = versusBaseline(churn(3600), { clients: 5, meshmux: churn(400) }, churn(9000));
    assert.equal(a.latencyP99, 9);
    assert.equal(b.latencyP99, 9);
    assert.notEqual(a.latencyP99FullFleet, b.latencyP99FullFleet);
  });
});
