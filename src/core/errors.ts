/**
 * The closed table of error codes. Each code has one meaning everywhere; edges (gRPC, HTTP, CLI)
 * translate codes, core code never does.
 */
export const ERROR_CODES = {
  /** A document could not be parsed as YAML. */
  YAML_SYNTAX: 'input',
  /** A document or field does not match the schema of its kind. */
  SCHEMA: 'input',
  /** metadata is missing or invalid (name, namespace, labels, annotations). */
  METADATA: 'input',
  /** apiVersion/kind is not an Istio kind meshmux serves. */
  UNKNOWN_KIND: 'input',
  /** Bytes from an upstream could not be decoded. */
  DECODE: 'input',
  /** An input passes a configured bound (file size, alias expansion); it is refused, not truncated. */
  LIMIT: 'input',
  /** meshmux's own configuration file is invalid. */
  CONFIG: 'input',
  /** A client or peer is not allowed to do what it asked. */
  PERMISSION_DENIED: 'denied',
  /** A source or transport failed; the operation may succeed later. */
  UNAVAILABLE: 'transient',
  /** Persisted state could not be read (corrupt, truncated, foreign) or written (disk full, read-only). */
  STATE: 'transient',
  /** A bug or broken invariant. */
  INTERNAL: 'internal',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Where in an input an error was found; every part is optional but printed when present. */
export interface ErrorLocation {
  /** File path, URL or source name. */
  readonly file?: string;
  /** Zero-based index of the YAML document within the file. */
  readonly doc?: number;
  /** One-based line of the document's start (or of the field, when known). */
  readonly line?: number;
  /** One-based column of the field on that line, when known (configuration files). */
  readonly column?: number;
  /** Field path in the document, e.g. `spec.http[0].timeout`. */
  readonly field?: string;
}

/** The one error class of meshmux. `message` is the reason; `location` says where. */
export class MeshmuxError extends Error {
  override readonly name = 'MeshmuxError';
  readonly code: ErrorCode;
  readonly location: ErrorLocation;

  constructor(code: ErrorCode, reason: string, location: ErrorLocation = {}, options?: { cause?: unknown }) {
    super(reason, options);
    this.code = code;
    this.location = location;
  }

  /** The reason only, without the location. */
  get reason(): string {
    return this.message;
  }

  /** `file doc N (line L) field F: reason` with the parts that are known. */
  describe(): string {
    const { file, doc, line, field } = this.location;
    const where = [
      file,
      doc === undefined ? undefined : `doc ${doc}`,
      line === undefined ? undefined : `line ${line}`,
      field === undefined ? undefined : `field ${field}`,
    ].filter((p) => p !== undefined);
    return where.length > 0 ? `${where.join(' ')}: ${this.message}` : this.message;
  }

  /** A copy with more location filled in; fields already known are kept. */
  at(location: ErrorLocation): MeshmuxError {
    return new MeshmuxError(
      this.code,
      this.message,
      { ...location, ...this.location },
      { cause: this.cause },
    );
  }
}

/** Wraps anything thrown into a MeshmuxError with the given code, keeping it as `cause`. */
export function toMeshmuxError(err: unknown, code: ErrorCode, location: ErrorLocation = {}): MeshmuxError {
  if (err instanceof MeshmuxError) return err.at(location);
  const reason = err instanceof Error ? err.message : String(err);
  return new MeshmuxError(code, reason, location, { cause: err });
}
