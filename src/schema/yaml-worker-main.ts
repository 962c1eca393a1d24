/**
 * The entry point of the YAML reading worker thread: reads each text it is sent with
 * `readYamlDocuments` and answers with plain data (yaml-worker-protocol.ts). It reads one text at
 * a time and never yields: nothing else runs on this thread, so a long read delays only the texts
 * queued behind it, never the main event loop.
 */
import { parentPort } from 'node:worker_threads';
import type { MeshmuxError } from '../core/errors.js';
import type { Timestamp } from '../core/resource.js';
import {
  YAML_REPLY_PART_SIZE,
  type PlainError,
  type PlainResource,
  type YamlReadReply,
  type YamlReadRequest,
} from './yaml-worker-protocol.js';
import { readYamlDocuments } from './yaml-reader.js';

/**
 * Handed out for every document without `creationTimestamp`; recognised by identity, so the main
 * thread can apply the caller's `createTimeFor` instead (a function cannot cross a thread).
 */
const NO_CREATE_TIME: Timestamp = { seconds: 0, nanos: 0 };

function plain(e: MeshmuxError): PlainError {
  return { code: e.code, message: e.message, location: { ...e.location } };
}

/** Reads one request into the parts of its reply, in order (at least one). */
export function answer(request: YamlReadRequest): YamlReadReply[] {
  const result = readYamlDocuments(request.text, {
    file: request.file,
    defaultNamespace: request.defaultNamespace,
    createTimeFor: () => NO_CREATE_TIME,
    ...(request.aliasLimit === undefined ? {} : { aliasLimit: request.aliasLimit }),
  });
  const resources: PlainResource[] = result.resources.map((r) => ({
    kind: r.kind,
    namespace: r.namespace,
    name: r.name,
    labels: { ...r.labels },
    annotations: { ...r.annotations },
    createTime: r.createTime === NO_CREATE_TIME ? null : r.createTime,
    body: r.body,
    origin: r.origin,
    version: r.version,
  }));
  const errors = result.errors.map(plain);
  const warnings = result.warnings.map(plain);
  const parts: YamlReadReply[] = [];
  let r = 0;
  let e = 0;
  let w = 0;
  do {
    let room = YAML_REPLY_PART_SIZE;
    const take = <T>(list: T[], from: number): T[] => {
      const taken = list.slice(from, from + room);
      room -= taken.length;
      return taken;
    };
    const partResources = take(resources, r);
    const partErrors = take(errors, e);
    const partWarnings = take(warnings, w);
    r += partResources.length;
    e += partErrors.length;
    w += partWarnings.length;
    const last = r === resources.length && e === errors.length && w === warnings.length;
    parts.push({
      id: request.id,
      resources: partResources,
      errors: partErrors,
      warnings: partWarnings,
      last,
    });
  } while (!(parts.at(-1)?.last ?? false));
  return parts;
}

parentPort?.on('message', (request: YamlReadRequest) => {
  for (const part of answer(request)) parentPort?.postMessage(part);
});
