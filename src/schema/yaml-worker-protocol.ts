/**
 * The messages between the main thread and the YAML reading worker (yaml-worker-pool.ts and
 * yaml-worker-main.ts). Only plain data crosses a thread: functions (`createTimeFor`) and class
 * instances (`MeshmuxError`) are rebuilt on the main thread from these shapes.
 */
import type { ErrorCode, ErrorLocation } from '../core/errors.js';
import type { ResourceOrigin, Timestamp } from '../core/resource.js';

/** One text to read. */
export interface YamlReadRequest {
  readonly id: number;
  readonly text: string;
  readonly file: string;
  readonly defaultNamespace: string;
  readonly aliasLimit?: number;
}

/** A resource as plain data; `createTime` is null when the document named none. */
export interface PlainResource {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly createTime: Timestamp | null;
  readonly body: Uint8Array;
  readonly origin: ResourceOrigin;
  /** Derived in the worker by `makeResource`, from the same fields as on the main thread. */
  readonly version: string;
}

/** A MeshmuxError as plain data (its `cause` stays behind). */
export interface PlainError {
  readonly code: ErrorCode;
  readonly message: string;
  readonly location: ErrorLocation;
}

/**
 * One part of the worker's answer to a request. A large answer comes in several parts of at most
 * `YAML_REPLY_PART_SIZE` entries, each handled in its own turn of the main event loop, so taking
 * in 25,000 objects never blocks it for the whole lot; the entries of the parts, concatenated in
 * order, are the answer. `last` marks the final part.
 */
export interface YamlReadReply {
  readonly id: number;
  readonly resources: PlainResource[];
  readonly errors: PlainError[];
  readonly warnings: PlainError[];
  readonly last: boolean;
}

/** Most resources, errors and warnings together in one reply part. */
export const YAML_REPLY_PART_SIZE = 512;
