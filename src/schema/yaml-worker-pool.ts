/**
 * Reads YAML texts on a worker thread, so the main event loop only ever receives finished
 * results: a cold, hostile or simply large file delays the texts queued behind it, never the
 * streams, timers and health checks of the main thread.
 *
 * One worker, not a pool of several: reading is CPU-bound and meshmux runs beside its own main
 * thread on a few cores, so a second reader would take CPU from the main thread rather than
 * finish sooner; sources read their files one at a time anyway, and a single worker keeps the
 * memory cap (`heapLimitMb`) a bound on the whole of reading, not on each of N readers.
 */
import { Worker } from 'node:worker_threads';
import { MeshmuxError, type ErrorLocation } from '../core/errors.js';
import { restoreResource, timestampFromDate } from '../core/resource.js';
import type { PlainError, YamlReadReply, YamlReadRequest } from './yaml-worker-protocol.js';
import type { ReadYamlOptions, ReadYamlResult } from './yaml-read-types.js';

/** Default heap cap of the worker, MiB: several times what the largest file the default size cap admits needs. */
export const DEFAULT_YAML_WORKER_HEAP_MB = 1024;

/** Options of a `YamlWorkerPool`. */
export interface YamlWorkerPoolOptions {
  /**
   * Old-generation heap of the worker, MiB. A text whose reading needs more is refused with a
   * `LIMIT` error naming it; the worker is restarted for the next text. Default
   * {@link DEFAULT_YAML_WORKER_HEAP_MB}.
   */
  readonly heapLimitMb?: number;
}

interface Job {
  readonly request: YamlReadRequest;
  readonly options: ReadYamlOptions;
  readonly resolve: (result: ReadYamlResult) => void;
  /** What the reply parts received so far hold, rebuilt. */
  readonly result: ReadYamlResult;
}

/**
 * The worker script beside this module: in `dist/src/` once built; in `dist/bundle/`, where it is an
 * entry of its own, beside the chunk that holds this code.
 */
const WORKER_SCRIPT = new URL('./yaml-worker-main.js', import.meta.url);

function rebuildError(e: PlainError): MeshmuxError {
  return new MeshmuxError(e.code, e.message, e.location);
}

/** Adds a reply part to `into`, applying `createTimeFor` here, in document order. */
function rebuild(reply: YamlReadReply, options: ReadYamlOptions, into: ReadYamlResult): void {
  for (const r of reply.resources) {
    // The version was derived in the worker by makeResource from kind, names, labels,
    // annotations and body, none of which change here: createTime is not part of it.
    into.resources.push(
      restoreResource(
        {
          kind: r.kind,
          namespace: r.namespace,
          name: r.name,
          labels: r.labels,
          annotations: r.annotations,
          createTime:
            r.createTime ??
            options.createTimeFor?.(r.kind, r.namespace, r.name) ??
            timestampFromDate(new Date()),
          body: r.body,
          origin: r.origin,
        },
        r.version,
      ),
    );
  }
  for (const e of reply.errors) into.errors.push(rebuildError(e));
  for (const w of reply.warnings) into.warnings.push(rebuildError(w));
}

/**
 * A lazily started reading worker with a queue. `read` never throws and never rejects: a worker
 * that dies while reading a text (out of memory, a crash) becomes an error for that text, and the
 * next text gets a new worker. The worker is started on the first read, and holds the process
 * open only while a text is being read (it is `unref`'d when idle).
 */
export class YamlWorkerPool {
  private readonly heapLimitMb: number;
  private worker: Worker | undefined;
  private current: Job | undefined;
  /** Why the current worker is going away, if it said (`error` comes before `exit`). */
  private failure: Error | undefined;
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;

  constructor(options: YamlWorkerPoolOptions = {}) {
    this.heapLimitMb = options.heapLimitMb ?? DEFAULT_YAML_WORKER_HEAP_MB;
  }

  /**
   * The same result `readYamlDocuments(text, options)` gives, read on the worker: same resources
   * (byte-identical bodies and versions, `createTimeFor` applied on this thread), same error and
   * warning messages and locations (without their `cause`).
   */
  read(text: string, options: ReadYamlOptions): Promise<ReadYamlResult> {
    return new Promise<ReadYamlResult>((resolve) => {
      const request: YamlReadRequest = {
        id: this.nextId++,
        text,
        file: options.file,
        defaultNamespace: options.defaultNamespace,
        ...(options.aliasLimit === undefined ? {} : { aliasLimit: options.aliasLimit }),
      };
      if (this.closed) {
        resolve(this.failed(options, new MeshmuxError('UNAVAILABLE', 'the YAML reader is closed')));
        return;
      }
      this.queue.push({ request, options, resolve, result: { resources: [], errors: [], warnings: [] } });
      this.pump();
    });
  }

  /** Stops the worker; texts queued or being read get an `UNAVAILABLE` error. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      job.resolve(this.failed(job.options, new MeshmuxError('UNAVAILABLE', 'the YAML reader is closed')));
    }
    const worker = this.worker;
    if (worker !== undefined) await worker.terminate();
  }

  private failed(options: ReadYamlOptions, error: MeshmuxError): ReadYamlResult {
    const where: ErrorLocation = { file: options.file };
    return { resources: [], errors: [error.at(where)], warnings: [] };
  }

  /** Sends the next queued text to the worker when it is free, starting one if needed. */
  private pump(): void {
    if (this.current !== undefined || this.closed) return;
    const job = this.queue.shift();
    if (job === undefined) {
      this.worker?.unref();
      return;
    }
    const worker = this.worker ?? this.start();
    worker.ref();
    this.current = job;
    worker.postMessage(job.request);
  }

  private start(): Worker {
    const worker = new Worker(WORKER_SCRIPT, {
      resourceLimits: { maxOldGenerationSizeMb: this.heapLimitMb },
      // The worker needs no flag of the main process, and some would break it (`--input-type`,
      // `--inspect` on the same port, a heap size that contradicts the cap above).
      execArgv: [],
      stdout: false,
      stderr: false,
    });
    this.worker = worker;
    this.failure = undefined;
    worker.on('message', (reply: YamlReadReply) => {
      const job = this.current;
      if (job === undefined || job.request.id !== reply.id) return;
      rebuild(reply, job.options, job.result);
      if (!reply.last) return;
      this.current = undefined;
      job.resolve(job.result);
      this.pump();
    });
    worker.on('error', (err) => {
      this.failure = err;
    });
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = undefined;
      const job = this.current;
      this.current = undefined;
      if (job !== undefined) job.resolve(this.failed(job.options, this.deathError(this.failure)));
      this.pump();
    });
    return worker;
  }

  private deathError(cause: Error | undefined): MeshmuxError {
    if ((cause as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      return new MeshmuxError(
        'LIMIT',
        `reading this file needs more than the YAML reader's memory limit of ${this.heapLimitMb} MiB`,
        {},
        { cause },
      );
    }
    if (this.closed) return new MeshmuxError('UNAVAILABLE', 'the YAML reader is closed');
    return new MeshmuxError(
      'INTERNAL',
      `the YAML reader stopped while reading this file${cause === undefined ? '' : `: ${cause.message}`}`,
      {},
      { cause },
    );
  }
}
