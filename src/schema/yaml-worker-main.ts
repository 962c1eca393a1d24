/**
 * The entry point of the YAML reading worker thread: reads each text it is sent with
 * `readYamlDocuments` and answers with plain data (yaml-worker-protocol.ts). It reads one text at
 * a time and never yields: nothing else runs on this thread, so a long read delays only the texts
 * queued behind it, never the main event loop.
 */
import { parentPort } from 'node:worker_threads';
import type { MeshmuxError } from '../core/errors.js';
import type { Timestamp } from '../core/resource.js';
import type { PlainError, YamlReadReply, YamlReadRequest } from './yaml-worker-protocol.js';
import { readYamlDocuments } from './yaml-reader.js';

/**
 * Handed out for every document without `creationTimestamp`; recognised by identity, so the main
 * thread can apply the caller's `createTimeFor` instead (a function cannot cross a thread).
 */
const NO_CREATE_TIME: Timestamp = { seconds: 0, nanos: 0 };

function plain(e: MeshmuxError): PlainError {
  return { code: e.code, message: e.message, location: { ...e.location } };
}

/** Reads one request into its reply. */
export function answer(request: YamlReadRequest): YamlReadReply {
  const result = readYamlDocuments(request.text, {
    file: request.file,
    defaultNamespace: request.defaultNamespace,
    createTimeFor: () => NO_CREATE_TIME,
    ...(request.aliasLimit === undefined ? {} : { aliasLimit: request.aliasLimit }),
  });
  return {
    id: request.id,
    resources: result.resources.map((r) => ({
      kind: r.kind,
      namespace: r.namespace,
      name: r.name,
      labels: { ...r.labels },
      annotations: { ...r.annotations },
      createTime: r.createTime === NO_CREATE_TIME ? null : r.createTime,
      body: r.body,
      origin: r.origin,
      version: r.version,
    })),
    errors: result.errors.map(plain),
    warnings: result.warnings.map(plain),
  };
}

parentPort?.on('message', (request: YamlReadRequest) => {
  parentPort?.postMessage(answer(request));
});
