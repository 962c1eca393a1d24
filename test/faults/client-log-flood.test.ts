/**
 * The lines a client makes meshmux log by opening streams in a loop, each under another node id,
 * against meshmux running as its own process with one policy (istiods named `istiod-*`): streams
 * admitted, refused by the policies, refused for a node id over the limit. Each kind is logged
 * in at most 100 lines in 10 s over every stream, and what was left out is counted in the log.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { stringStruct } from '../support/ads-wire.js';
import { report } from '../support/fault-kit.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess, type LogLine } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { SE } from '../support/type-urls.js';

const FLOOD = 400;
const WINDOW_MS = 10_000;

describe('a flood of streams against the log', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: MeshmuxProcess;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-fault-log-flood-'));
    await writeFile(
      path.join(dir, 'se.yaml'),
      [
        'apiVersion: networking.istio.io/v1',
        'kind: ServiceEntry',
        'metadata: { name: a, namespace: shop }',
        'spec: { hosts: [a.example.com], ports: [{ number: 443, name: https, protocol: TLS }] }',
        '',
      ].join('\n'),
    );
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'sources: [{ name: shop, type: file, path: ./se.yaml }]',
        'policies:',
        "  - { name: fleet, match: { nodeId: 'istiod-*' } }",
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
  });
  after(async () => {
    await meshmux.stop();
    await dispose();
  });

  /** Opens `FLOOD` streams, 50 at a time, each sending `node(i)` and reset once answered or refused. */
  async function flood(node: (i: number) => string, answered: boolean): Promise<void> {
    for (let s = 0; s < FLOOD; s += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, k) => {
          const raw = new RawAdsStream(meshmux.xds);
          raw.send({ type_url: SE, node: { id: node(s + k), metadata: stringStruct({}) } });
          if (answered) await raw.next(30_000);
          else await raw.status;
          raw.close();
        }),
      );
    }
  }

  /** The lines of `msg` since `from` and how many they and the counts of lines left out stand for. */
  function counted(from: number, msg: string, leftOutMsg?: string): { lines: number; standFor: number } {
    const lines = meshmux.logs.slice(from).filter((l) => l.msg === msg);
    const reports = meshmux.logs.slice(from).filter((l) => l.msg === leftOutMsg);
    const number = (l: LogLine, key: string): number => {
      const value = l[key];
      return typeof value === 'number' ? value : 0;
    };
    return {
      lines: lines.length,
      standFor:
        lines.reduce((n, l) => n + 1 + number(l, 'notLoggedBefore'), 0) +
        reports.reduce((n, l) => n + number(l, 'notLogged'), 0),
    };
  }

  it('audits admissions and refusals by the policies in at most 100 lines each in 10 s, and counts the rest once the window ends', async () => {
    const from = meshmux.logs.length;
    await flood((i) => `istiod-flood-${i}`, true);
    await flood((i) => `rogue-${i}`, false);
    await meshmux.waitForLog(
      (l) => l.msg === 'client refusals not logged',
      from,
      2 * WINDOW_MS,
      'the count of refusals left out',
    );
    await meshmux.waitForLog(
      (l) => l.msg === 'client admissions not logged',
      from,
      2 * WINDOW_MS,
      'the count of admissions left out',
    );
    const admitted = counted(from, 'client admitted', 'client admissions not logged');
    const refused = counted(from, 'client refused', 'client refusals not logged');
    report(`${FLOOD} streams admitted and ${FLOOD} refused by the policies`, {
      'client admitted lines': admitted.lines,
      'client refused lines': refused.lines,
    });
    assert.ok(admitted.lines <= 100, `${admitted.lines} lines of admissions`);
    assert.ok(refused.lines <= 100, `${refused.lines} lines of refusals`);
    assert.equal(admitted.standFor, FLOOD, 'admissions logged or counted');
    assert.equal(refused.standFor, FLOOD, 'refusals logged or counted');
  });

  it('logs streams refused for a node id over the limit in at most 100 lines in 10 s, the next line naming the rest', async () => {
    const from = meshmux.logs.length;
    const started = performance.now();
    await flood((i) => `istiod-${'x'.repeat(1100)}-${i}`, false);
    const lines = counted(from, 'client refused: over a limit').lines;
    await delay(Math.max(0, started + WINDOW_MS + 1_000 - performance.now()));
    const next = meshmux.logs.length;
    const late = new RawAdsStream(meshmux.xds);
    late.send({ type_url: SE, node: { id: `istiod-${'x'.repeat(1100)}-late`, metadata: stringStruct({}) } });
    await late.status;
    late.close();
    const first = await meshmux.waitForLog(
      (l) => l.msg === 'client refused: over a limit',
      next,
      5_000,
      'a line once the window ended',
    );
    report(`${FLOOD} streams refused for a node id over the limit`, { 'lines of them': lines });
    assert.ok(lines <= 100, `${lines} lines of refusals over a limit`);
    assert.equal(first['notLoggedBefore'], FLOOD - lines, 'the line after the window names those left out');
  });

  it('logs a warning each stream may make (a type it does not know, a NACK) in at most 100 lines in 10 s over every stream', async () => {
    const from = meshmux.logs.length;
    for (let s = 0; s < FLOOD; s += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, k) => {
          const raw = new RawAdsStream(meshmux.xds);
          const node = { id: `istiod-warn-${s + k}`, metadata: stringStruct({}) };
          raw.send({ type_url: SE, node });
          const answer = await raw.next(30_000);
          raw.send({
            type_url: SE,
            response_nonce: answer.nonce,
            error_detail: { code: 3, message: 'rejected on purpose' },
          });
          raw.send({ type_url: 'type.googleapis.com/example.Unknown' });
          await raw.next(30_000);
          raw.close();
        }),
      );
    }
    // The last stream's lines are logged before its answer to the unknown type is sent.
    const unknown = counted(from, 'unknown type URL: it will be answered empty');
    const nacks = counted(from, 'client rejected a response');
    report(`${FLOOD} streams each sending a NACK and a type it does not know`, {
      'unknown type lines': unknown.lines,
      'NACK lines': nacks.lines,
    });
    assert.ok(unknown.lines >= 1, 'the first unknown type is logged');
    assert.ok(nacks.lines >= 1, 'the first NACK is logged');
    assert.ok(unknown.lines <= 100, `${unknown.lines} lines of unknown types`);
    assert.ok(nacks.lines <= 100, `${nacks.lines} lines of NACKs`);
  });
});
