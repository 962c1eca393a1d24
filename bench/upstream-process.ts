/**
 * The parent's handle on the upstream simulators' own process (`upstream-main`): one
 * {@link RemoteUpstream} per simulator, batching changes as the simulator would and sending the
 * state it decided on (its kinds and sequence) to the process, which reports back when it wrote
 * it. The parent's model stays the reference; every edit of it is sent on, in order, before the
 * flush that carries it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SE, VS, type FixtureObject, type MeshModel, type ObjectEdit, type Shape } from './fixtures.js';
import {
  BatchedUpstream,
  ChangeBatch,
  type SimulatedUpstream,
  type UpstreamFlush,
} from './upstream-simulator.js';
import type { KindDescriptor } from '../src/schema/kinds.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The two kinds the simulators serve, as the messages name them. */
export type KindName = 'ServiceEntry' | 'VirtualService';

/** An object as it crosses the IPC channel: its kind by name. */
export type WireObject = Omit<FixtureObject, 'kind'> & { readonly kind: KindName };

export type WireEdit =
  | { readonly upstream: number; readonly set: WireObject }
  | { readonly upstream: number; readonly kind: KindName; readonly deleted: string };

export interface UpstreamArgs {
  readonly shape: Shape;
  readonly seed: number;
}

export type ToUpstreams =
  | { readonly type: 'edit'; readonly edit: WireEdit }
  | {
      readonly type: 'flush';
      readonly upstream: number;
      readonly kinds: readonly KindName[];
      readonly seq: number;
    }
  | { readonly type: 'drop'; readonly upstream: number; readonly seq: number }
  | { readonly type: 'usage' }
  | { readonly type: 'close' };

export type FromUpstreams =
  | { readonly type: 'ready'; readonly addresses: readonly string[] }
  /** The process's CPU so far (user and system), milliseconds. */
  | { readonly type: 'usage'; readonly cpuMs: number }
  /** `sentAt` on the monotonic clock both processes read (`process.hrtime`), in milliseconds. */
  | { readonly type: 'flushed'; readonly upstream: number; readonly seq: number; readonly sentAt: number }
  | {
      readonly type: 'status';
      readonly upstream: number;
      /** The sequence the simulator stood at when it reported. */
      readonly seq: number;
      readonly streams: number;
      readonly answeredTypes: number;
      readonly bytesSent: number;
    };

export function kindOf(name: KindName): KindDescriptor {
  return name === 'ServiceEntry' ? SE : VS;
}

export function kindName(kind: KindDescriptor): KindName {
  return kind === SE ? 'ServiceEntry' : 'VirtualService';
}

export function toWire(edit: ObjectEdit): WireEdit {
  if ('set' in edit) return { upstream: edit.upstream, set: { ...edit.set, kind: kindName(edit.set.kind) } };
  return { upstream: edit.upstream, kind: kindName(edit.kind), deleted: edit.deleted };
}

export function fromWire(edit: WireEdit): ObjectEdit {
  if ('set' in edit) return { upstream: edit.upstream, set: { ...edit.set, kind: kindOf(edit.set.kind) } };
  return { upstream: edit.upstream, kind: kindOf(edit.kind), deleted: edit.deleted };
}

/** Milliseconds on the clock `process.hrtime` reads, which every process of the machine shares. */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

let offsetMs: number | undefined;

/**
 * How far this process's `performance.now()` is from the shared clock: a constant, but one
 * reading of each can be milliseconds apart (a first call's set-up, or the process descheduled
 * between them), so it is the reading whose two sides lie closest in time, of many.
 */
function clockOffset(): number {
  if (offsetMs !== undefined) return offsetMs;
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 200; i++) {
    const before = monotonicMs();
    const now = performance.now();
    const after = monotonicMs();
    if (after - before < best) {
      best = after - before;
      offset = (before + after) / 2 - now;
    }
  }
  return (offsetMs = offset);
}

/** A `performance.now()` reading of this process, on the shared clock. */
export function toMonotonic(now: number): number {
  return now + clockOffset();
}

/** A time on the shared clock, on this process's `performance.now()`. */
export function fromMonotonic(ms: number): number {
  return ms - clockOffset();
}

/** One simulator as the parent drives it: the batching and the sequence here, the streams in the process. */
export class RemoteUpstream extends BatchedUpstream implements SimulatedUpstream {
  onFlush: (flush: UpstreamFlush) => void = () => undefined;
  bytesSent = 0;
  streams = 0;
  answeredTypes = 0;
  protected readonly batch: ChangeBatch;

  constructor(
    readonly index: number,
    private readonly post: (message: ToUpstreams) => void,
  ) {
    super();
    this.batch = new ChangeBatch((kinds, seq) =>
      post({ type: 'flush', upstream: index, kinds: kinds.map(kindName), seq }),
    );
  }

  dropStreams(): void {
    this.batch.restart();
    // Until the process reports from the new sequence, nothing is open or answered.
    this.streams = 0;
    this.answeredTypes = 0;
    this.post({ type: 'drop', upstream: this.index, seq: this.batch.seq });
  }

  /** A report of the process. A status from before the last sequence decided here is stale but for its bytes. */
  receive(message: Extract<FromUpstreams, { type: 'flushed' | 'status' }>): void {
    if (message.type === 'flushed') {
      this.onFlush({ upstream: this.index, seq: message.seq, sentAt: fromMonotonic(message.sentAt) });
      return;
    }
    this.bytesSent = Math.max(this.bytesSent, message.bytesSent);
    if (message.seq < this.batch.seq) return;
    this.streams = message.streams;
    this.answeredTypes = message.answeredTypes;
  }
}

/** The upstream simulators of a model just built, in a process of their own. */
export class UpstreamProcess {
  readonly upstreams: readonly RemoteUpstream[];
  private readonly child: ChildProcess;
  private readonly ready: Promise<readonly string[]>;
  private closing = false;
  private readonly usage: ((cpuMs: number) => void)[] = [];

  constructor(model: MeshModel) {
    const args: UpstreamArgs = { shape: model.shape, seed: model.seed };
    this.child = fork(path.join(HERE, 'upstream-main.js'), [JSON.stringify(args)], { stdio: 'inherit' });
    const post = (message: ToUpstreams): void => this.send(message);
    this.upstreams = model.upstreams.map((u) => new RemoteUpstream(u.index, post));
    model.onEdit = (edit) => post({ type: 'edit', edit: toWire(edit) });
    let listening = false;
    this.ready = new Promise((resolve, reject) => {
      this.child.once('exit', (code) => {
        if (this.closing) return;
        const error = new Error(`the upstream simulators' process exited with ${String(code)}`);
        // Before it listens the start fails; after, the run cannot go on without its upstreams.
        if (!listening) reject(error);
        else
          setImmediate(() => {
            throw error;
          });
      });
      this.child.on('message', (message: FromUpstreams) => {
        if (message.type === 'ready') {
          listening = true;
          resolve(message.addresses);
        } else if (message.type === 'usage') this.usage.shift()?.(message.cpuMs);
        else this.upstreams[message.upstream]?.receive(message);
      });
    });
  }

  /** The simulators' addresses once they listen, in the model's upstream order. */
  addresses(): Promise<readonly string[]> {
    return this.ready;
  }

  /** The process's CPU so far (user and system), milliseconds. */
  cpuMs(): Promise<number> {
    return new Promise((resolve) => {
      this.usage.push(resolve);
      this.send({ type: 'usage' });
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.send({ type: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  private send(message: ToUpstreams): void {
    this.child.send(message);
  }
}
