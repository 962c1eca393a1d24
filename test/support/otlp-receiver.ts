/**
 * A minimal OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` with OTLP JSON (gzip or
 * not), flattens every span with its resource, and lets a test await spans as they arrive.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** A span as received, with attributes decoded to plain values and ids in hex. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind number: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Readonly<Record<string, unknown>>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message: string };
  readonly resource: Readonly<Record<string, unknown>>;
}

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}

interface KeyValue {
  key: string;
  value?: AnyValue;
}

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: KeyValue[];
  status?: { code?: number; message?: string };
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
  }>;
}

function decodeValue(v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(decodeValue);
  return undefined;
}

function decodeAttributes(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, decodeValue(kv.value)]));
}

/** Ids arrive as hex in OTLP JSON; base64 is accepted too. */
function hexId(id: string | undefined): string {
  if (id === undefined || id === '') return '';
  return /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

interface Waiter {
  readonly predicate: (spans: readonly ReceivedSpan[]) => boolean;
  readonly resolve: () => void;
}

export class OtlpReceiver {
  private readonly received: ReceivedSpan[] = [];
  private readonly waiters = new Set<Waiter>();
  /** Requests that could not be decoded, with the reason. */
  readonly rejected: string[] = [];

  private constructor(private readonly server: Server) {
    server.on('request', (req, res) => {
      this.accept(req).then(
        (status) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(status === 200 ? '{}' : '{"error":"bad request"}');
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
    });
  }

  /** Listens on a free loopback port. */
  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new OtlpReceiver(server);
  }

  /** The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it. */
  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  get spans(): readonly ReceivedSpan[] {
    return this.received;
  }

  /** Resolves once the spans received so far satisfy `predicate`; rejects after `timeoutMs`. */
  waitFor(predicate: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs: number): Promise<void> {
    if (predicate(this.received)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(
          new Error(
            `spans never matched in ${timeoutMs} ms; received: ${JSON.stringify(this.received.map((s) => s.name))}`,
          ),
        );
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async accept(req: IncomingMessage): Promise<number> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      this.rejected.push(`${req.method ?? ''} ${req.url ?? ''}`);
      return 404;
    }
    let body = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
    if (!(req.headers['content-type'] ?? '').includes('json')) {
      this.rejected.push(`content-type ${req.headers['content-type'] ?? '(none)'}`);
      return 415;
    }
    let request: ExportRequest;
    try {
      request = JSON.parse(body.toString('utf8')) as ExportRequest;
    } catch (err) {
      this.rejected.push(`undecodable JSON: ${String(err)}`);
      return 400;
    }
    for (const rs of request.resourceSpans ?? []) {
      const resource = decodeAttributes(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.received.push({
            traceId: hexId(s.traceId),
            spanId: hexId(s.spanId),
            parentSpanId: hexId(s.parentSpanId),
            name: s.name,
            kind: s.kind ?? 0,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: decodeAttributes(s.attributes),
            status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
            resource,
          });
        }
      }
    }
    for (const w of [...this.waiters]) {
      if (w.predicate(this.received)) {
        this.waiters.delete(w);
        w.resolve();
      }
    }
    return 200;
  }
}
