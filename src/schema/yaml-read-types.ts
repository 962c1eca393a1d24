/**
 * The options and result of the YAML reader (yaml-reader.ts), in a file of their own so the
 * reader and its worker pool can both name them.
 */
import type { MeshmuxError } from '../core/errors.js';
import type { ConfigResource, Timestamp } from '../core/resource.js';

/** Options for `readYamlDocuments`. */
export interface ReadYamlOptions {
  /** Names the input in errors and in each resource's origin (a path, URL or source name). */
  readonly file: string;
  /** Namespace of documents that name none. */
  readonly defaultNamespace: string;
  /**
   * Creation time of a resource whose metadata has no `creationTimestamp`; called with the kind's
   * registry key. Default: the current time.
   */
  readonly createTimeFor?: (kind: string, namespace: string, name: string) => Timestamp;
  /**
   * Nodes the aliases of the whole text may expand to, all documents together; default
   * `ALIAS_EXPANSION_LIMIT`. Documents whose aliases go past it are rejected with an error saying
   * "alias expansion limit"; the others are read.
   */
  readonly aliasLimit?: number;
}

/** Options for `readYamlDocumentsInSlices`: how often it lets other work run (the worker path ignores them). */
export interface ReadYamlAsyncOptions extends ReadYamlOptions {
  /** Longest stretch of reading between two yields to the event loop, ms. Default 10. */
  readonly sliceMs?: number;
  /** Monotonic milliseconds. Default `performance.now`. */
  readonly now?: () => number;
}

/** What one YAML text yielded. Arrays are fresh and owned by the caller. */
export interface ReadYamlResult {
  /** Valid Istio objects, in document order. */
  readonly resources: ConfigResource[];
  /**
   * One or more per rejected document; each names file, document index, line and field. Only the
   * first documents' are listed (`MAX_DOCUMENTS_WITH_PROBLEMS_LISTED`), then one error counts the
   * rest; nothing is read past the `MAX_REJECTED_DOCUMENTS`th rejected document.
   */
  readonly errors: MeshmuxError[];
  /** Skipped non-Istio documents, pruned unknown fields, duplicate keys; listed as errors are. */
  readonly warnings: MeshmuxError[];
}
