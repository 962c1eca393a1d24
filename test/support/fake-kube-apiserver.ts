/**
 * An in-process Kubernetes API server for tests, speaking the part of the API that list-and-watch
 * clients use: discovery (`/api`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`), list with a
 * collection `resourceVersion` (in pages with `limit` and `continue`, a token expiring with
 * compaction), and watch as chunked newline-delimited events with bookmarks,
 * `timeoutSeconds`, and `410 Gone` (as an HTTP status or as an `ERROR` event) for a compacted
 * `resourceVersion`. Label selectors (`k=v`, `k!=v`, `k`, `!k`) and field selectors
 * (`metadata.name`, `metadata.namespace`) apply to list and watch, on namespaced and cluster-wide
 * paths. A kind served at several versions shows the same objects at each. Its fidelity is proven
 * with the real `kubectl` (test/support/fake-kube-apiserver.test.ts). Faults a test injects per
 * kind ({@link FakeKubeApiServer.fault}, {@link FakeKubeApiServer.cutWatches}, {@link RawJson})
 * stand for a proxy, an RBAC change or an object no `JSON.stringify` can write.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

/** One custom resource type the server serves. */
export interface ServedKind {
  readonly group: string;
  /** Served versions; the first is the preferred (storage) one. */
  readonly versions: readonly string[];
  readonly kind: string;
  readonly plural: string;
}

/** An object as stored: what `put` takes (apiVersion optional, resourceVersion assigned). */
export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
    readonly resourceVersion?: string;
    readonly creationTimestamp?: string;
    readonly [key: string]: unknown;
  };
  readonly spec?: unknown;
}

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/**
 * JSON text placed in an object as it is, for what `JSON.stringify` cannot write: an object
 * nested thousands of levels deep, which the real API server accepts (up to 10,000 levels).
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/** `value` as JSON, with each {@link RawJson} in it written as its text. */
function toJson(value: unknown): string {
  const raw: string[] = [];
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (!(v instanceof RawJson)) return v;
    raw.push(v.text);
    return `@raw-json-${raw.length - 1}@`;
  });
  return raw.reduce((out, fragment, i) => out.replace(`"@raw-json-${i}@"`, () => fragment), text);
}

/**
 * How the server answers a kind's lists or watches instead of serving them: `close` is a 200
 * whose body ends at once, `gone` a 200 carrying one `ERROR` 410 event, `trickle` a 200 whose
 * body is one space every 100 ms for as long as the client waits, `hang` no answer at all (not
 * even headers), a number that HTTP status with a `Status` body (403 as after an RBAC change, 404
 * as after a CRD was deleted), `empty` a list of no items at the current resourceVersion (as from
 * an API server whose cache lags behind its storage; lists only).
 */
export type KubeFault = 'close' | 'gone' | 'trickle' | 'hang' | 'empty' | number;

interface LoggedEvent {
  readonly rv: number;
  readonly type: EventType;
  readonly object: KubeObject;
}

interface Watcher {
  readonly served: ServedKind;
  readonly version: string;
  readonly namespace: string | undefined;
  readonly matches: (object: KubeObject) => boolean;
  readonly response: ServerResponse;
}

/** How a compacted watch is refused: an HTTP 410, or a 200 stream carrying one `ERROR` event. */
export type GoneStyle = 'http' | 'event';

function keyOf(object: KubeObject): string {
  return `${object.metadata.namespace ?? ''}/${object.metadata.name}`;
}

/** A label selector as a predicate; throws naming the selector when it cannot be read. */
function labelPredicate(selector: string | null): (labels: Record<string, string>) => boolean {
  if (selector === null || selector === '') return () => true;
  const terms = selector.split(',').map((raw) => {
    const term = raw.trim();
    const neq = /^([^!=\s]+)\s*!=\s*(\S*)$/.exec(term);
    if (neq !== null) return (l: Record<string, string>) => l[neq[1]!] !== neq[2];
    const eq = /^([^!=\s]+)\s*==?\s*(\S*)$/.exec(term);
    if (eq !== null) return (l: Record<string, string>) => l[eq[1]!] === eq[2];
    const absent = /^!([^!=\s]+)$/.exec(term);
    if (absent !== null) return (l: Record<string, string>) => !(absent[1]! in l);
    if (/^[^!=\s]+$/.test(term)) return (l: Record<string, string>) => term in l;
    throw new Error(`labelSelector ${JSON.stringify(selector)}: cannot read term ${JSON.stringify(term)}`);
  });
  return (labels) => terms.every((t) => t(labels));
}

/** A field selector over `metadata.name` and `metadata.namespace`. */
function fieldPredicate(selector: string | null): (object: KubeObject) => boolean {
  if (selector === null || selector === '') return () => true;
  const terms = selector.split(',').map((raw) => {
    const m = /^(metadata\.name|metadata\.namespace)\s*(!=|==|=)\s*(\S*)$/.exec(raw.trim());
    if (m === null)
      throw new Error(`fieldSelector ${JSON.stringify(selector)}: unsupported term ${JSON.stringify(raw)}`);
    const field = m[1] === 'metadata.name' ? 'name' : 'namespace';
    const negate = m[2] === '!=';
    return (o: KubeObject) => ((o.metadata[field] ?? '') === m[3]) !== negate;
  });
  return (object) => terms.every((t) => t(object));
}

/** How the server authenticates its clients; default plain HTTP, anyone. */
export interface FakeKubeAuth {
  /** Serve HTTPS with this certificate and key (PEM file paths). */
  readonly tls?: { readonly cert: string; readonly key: string };
  /** Require a client certificate issued by this CA (PEM file path); others fail the handshake. */
  readonly clientCa?: string;
  /** Require `Authorization: Bearer <token>`; others get 401. */
  readonly token?: string;
}

/** The in-process API server; see the file comment. */
export class FakeKubeApiServer {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly kinds: ServedKind[] = [];
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private log: LoggedEvent[] = [];
  private rv = 1000;
  private compactedBelow = 0;
  private readonly watchers = new Set<Watcher>();
  private port = 0;
  private auth: FakeKubeAuth = {};
  /** Lists being read page by page, by continue token: the snapshot and where the next page starts. */
  private readonly pagedLists = new Map<
    string,
    {
      readonly snapshot: { readonly rv: number; readonly items: readonly KubeObject[] };
      readonly offset: number;
    }
  >();
  private pageTokens = 0;
  private expireContinue = false;
  /** Injected faults by `<plural> list` or `<plural> watch`. */
  private readonly faults = new Map<string, KubeFault>();
  /** Kinds (by plural) whose lists are answered late, and by how much (ms). */
  private readonly slow = new Map<string, number>();
  private readonly lagging = new Map<string, number>();
  /** Every request path with its query, in order (for asserting what a client asked). */
  readonly requests: string[] = [];

  /** Starts a server on 127.0.0.1 (`port` 0: any free port) serving `kinds`. */
  static async start(
    kinds: readonly ServedKind[],
    port = 0,
    auth: FakeKubeAuth = {},
  ): Promise<FakeKubeApiServer> {
    const fake = new FakeKubeApiServer();
    for (const k of kinds) fake.serve(k);
    fake.port = port;
    fake.auth = auth;
    await fake.listen();
    return fake;
  }

  /** `http://127.0.0.1:<port>`, or `https://` when serving TLS. */
  get url(): string {
    return `${this.auth.tls === undefined ? 'http' : 'https'}://127.0.0.1:${this.port}`;
  }

  /** Serves one more kind (as installing its CRD does). */
  serve(kind: ServedKind): void {
    this.kinds.push(kind);
    if (!this.objects.has(this.storeKey(kind))) this.objects.set(this.storeKey(kind), new Map());
  }

  /**
   * Stops serving every kind of `group`, objects kept, as an API server does while its CRD
   * handlers are not up yet: discovery of the group and every path under it answer 404, and its
   * open watches are cut. Returns the kinds, for {@link serve} to bring back.
   */
  unserveGroup(group: string): ServedKind[] {
    const gone = this.kinds.filter((k) => k.group === group);
    this.kinds.splice(0, this.kinds.length, ...this.kinds.filter((k) => k.group !== group));
    for (const w of this.watchers) {
      if (w.served.group !== group) continue;
      w.response.socket?.destroy();
      this.watchers.delete(w);
    }
    return gone;
  }

  /**
   * Takes `token` from now on and no other (the old one revoked, as after a rotation): requests
   * with another get 401; watches already open stay open.
   */
  rotateToken(token: string): void {
    this.auth = { ...this.auth, token };
  }

  /** A kubeconfig (YAML) whose one context, `name`, reaches this server; TLS is not verified. */
  kubeconfig(name = 'test'): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: ${name}, cluster: {server: "${this.url}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: ${name}, user: {token: "${this.auth.token ?? 'unused'}"}}]`,
      `contexts: [{name: ${name}, context: {cluster: ${name}, user: ${name}}}]`,
      `current-context: ${name}`,
      '',
    ].join('\n');
  }

  /** The current resourceVersion of the whole store. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Creates or replaces an object of a served kind; returns its new resourceVersion. */
  put(object: KubeObject): string {
    const served = this.servedByKind(object.kind);
    const store = this.objects.get(this.storeKey(served))!;
    const previous = store.get(keyOf(object));
    this.rv += 1;
    const stored: KubeObject = {
      ...object,
      apiVersion: `${served.group}/${served.versions[0]!}`,
      metadata: {
        uid: previous?.metadata['uid'] ?? `uid-${this.rv}`,
        creationTimestamp: previous?.metadata.creationTimestamp ?? new Date(0).toISOString(),
        generation: 1,
        ...object.metadata,
        resourceVersion: String(this.rv),
      },
    };
    store.set(keyOf(object), stored);
    this.record(previous === undefined ? 'ADDED' : 'MODIFIED', served, stored);
    return String(this.rv);
  }

  /** The stored object, or undefined. */
  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(this.storeKey(this.servedByKind(kind)))!.get(`${namespace ?? ''}/${name}`);
  }

  /** Deletes an object; false when there was none. */
  remove(kind: string, namespace: string | undefined, name: string): boolean {
    const served = this.servedByKind(kind);
    const store = this.objects.get(this.storeKey(served))!;
    const key = `${namespace ?? ''}/${name}`;
    const previous = store.get(key);
    if (previous === undefined) return false;
    store.delete(key);
    this.rv += 1;
    this.record('DELETED', served, {
      ...previous,
      metadata: { ...previous.metadata, resourceVersion: String(this.rv) },
    });
    return true;
  }

  /**
   * Forgets the history up to now, as etcd compaction does: a watch from an older resourceVersion
   * is refused with 410, and open watches end with an `ERROR` 410 event (`style` 'event') or are
   * cut (`style` 'http', the client then gets an HTTP 410 when it resumes).
   */
  compact(style: GoneStyle = 'event'): void {
    this.compactedBelow = this.rv;
    this.log = [];
    this.pagedLists.clear();
    for (const w of this.watchers) {
      if (style === 'event') this.writeEvent(w, { type: 'ERROR', object: goneStatus() });
      w.response.end();
    }
    this.watchers.clear();
  }

  /** Answers the next request carrying a continue token with 410, as after a compaction. */
  expireNextContinue(): void {
    this.expireContinue = true;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every open watch. */
  bookmark(): void {
    for (const w of this.watchers) {
      this.writeEvent(w, {
        type: 'BOOKMARK',
        object: {
          apiVersion: `${w.served.group}/${w.version}`,
          kind: w.served.kind,
          metadata: { resourceVersion: String(this.rv) },
        },
      });
    }
  }

  /**
   * Answers every later list or watch of `kind` with `fault` (undefined: serves them again). A
   * watch already open stays open: {@link cutWatches} ends it.
   */
  /** Answers the lists of `kind` as usual, `ms` late (undefined: at once again). */
  slowLists(kind: string, ms: number | undefined): void {
    if (ms === undefined) this.slow.delete(this.servedByKind(kind).plural);
    else this.slow.set(this.servedByKind(kind).plural, ms);
  }

  /**
   * Answers the next list of `kind` with what the server holds when it is asked, `ms` late: a list
   * served from a snapshot, whose answer arrives after the answers of lists asked for later.
   */
  lagNextList(kind: string, ms: number): void {
    this.lagging.set(this.servedByKind(kind).plural, ms);
  }

  fault(kind: string, on: 'list' | 'watch', fault: KubeFault | undefined): void {
    const key = `${this.servedByKind(kind).plural} ${on}`;
    if (fault === undefined) this.faults.delete(key);
    else this.faults.set(key, fault);
  }

  /**
   * Cuts the connection of every open watch of `kind` (of those watching one namespace, the ones of
   * `namespace` alone when given), as a proxy or a network fault does; returns how many.
   */
  cutWatches(kind: string, namespace?: string): number {
    const served = this.servedByKind(kind);
    let cut = 0;
    for (const w of this.watchers) {
      if (w.served !== served || (namespace !== undefined && w.namespace !== namespace)) continue;
      w.response.socket?.destroy();
      this.watchers.delete(w);
      cut++;
    }
    return cut;
  }

  /**
   * Ends every open watch of `kind` in `namespace` cleanly, as the server does when a watch's
   * timeout passes; returns how many.
   */
  endWatches(kind: string, namespace: string): number {
    const served = this.servedByKind(kind);
    let ended = 0;
    for (const w of this.watchers) {
      if (w.served !== served || w.namespace !== namespace) continue;
      w.response.end();
      this.watchers.delete(w);
      ended++;
    }
    return ended;
  }

  /** How many watches are open now. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Stops listening and cuts every connection; the store is kept for {@link restart}. */
  async stop(): Promise<void> {
    for (const w of this.watchers) w.response.destroy();
    this.watchers.clear();
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port with the same store. */
  async restart(): Promise<void> {
    await this.listen();
  }

  private async listen(): Promise<void> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.handle(req, res);
    const { tls, clientCa } = this.auth;
    const server: Server =
      tls === undefined
        ? createServer(handler)
        : createTlsServer(
            {
              cert: readFileSync(tls.cert),
              key: readFileSync(tls.key),
              ...(clientCa === undefined
                ? {}
                : { ca: readFileSync(clientCa), requestCert: true, rejectUnauthorized: true }),
            },
            handler,
          );
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  private storeKey(kind: ServedKind): string {
    return `${kind.group}/${kind.plural}`;
  }

  private servedByKind(kind: string): ServedKind {
    const served = this.kinds.find((k) => k.kind === kind);
    if (served === undefined) throw new Error(`kind ${kind} is not served by this fake API server`);
    return served;
  }

  private record(type: EventType, served: ServedKind, object: KubeObject): void {
    this.log.push({ rv: this.rv, type, object });
    for (const w of this.watchers) {
      if (w.served === served && w.matches(object))
        this.writeEvent(w, { type, object: atVersion(object, w) });
    }
  }

  private writeEvent(w: Watcher, event: { type: string; object: unknown }): void {
    w.response.write(`${toJson(event)}\n`);
  }

  private handle(req: IncomingMessage, res: ServerResponse, late = false): void {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (!late) this.requests.push(`${req.method ?? 'GET'} ${url.pathname}${url.search}`);
    if (this.auth.token !== undefined && req.headers.authorization !== `Bearer ${this.auth.token}`) {
      return this.status(res, 401, 'Unauthorized', 'Unauthorized');
    }
    try {
      if (req.method !== 'GET')
        return this.status(res, 405, 'MethodNotAllowed', `${req.method ?? ''} is not supported`);
      const parts = url.pathname.split('/').filter((p) => p !== '');
      if (url.pathname === '/api')
        return this.json(res, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
      if (url.pathname === '/api/v1')
        return this.json(res, { kind: 'APIResourceList', groupVersion: 'v1', resources: [] });
      if (url.pathname === '/apis')
        return this.json(res, {
          kind: 'APIGroupList',
          apiVersion: 'v1',
          groups: this.groups().map((g) => this.groupDoc(g)),
        });
      if (url.pathname === '/version')
        return this.json(res, { major: '1', minor: '32', gitVersion: 'v1.32.0' });
      if (parts[0] !== 'apis' || parts.length < 2)
        return this.status(res, 404, 'NotFound', `${url.pathname} not found`);
      const group = parts[1]!;
      if (!this.groups().includes(group))
        return this.status(res, 404, 'NotFound', `group ${group} not found`);
      if (parts.length === 2) return this.json(res, this.groupDoc(group));
      const version = parts[2]!;
      const inVersion = this.kinds.filter((k) => k.group === group && k.versions.includes(version));
      if (inVersion.length === 0) return this.status(res, 404, 'NotFound', `${group}/${version} not found`);
      if (parts.length === 3) {
        return this.json(res, {
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: `${group}/${version}`,
          resources: inVersion.map((k) => ({
            name: k.plural,
            singularName: k.kind.toLowerCase(),
            namespaced: true,
            kind: k.kind,
            verbs: ['get', 'list', 'watch'],
            categories: ['istio-io'],
          })),
        });
      }
      let namespace: string | undefined;
      let rest = parts.slice(3);
      if (rest[0] === 'namespaces' && rest.length >= 3) {
        namespace = rest[1];
        rest = rest.slice(2);
      }
      const served = inVersion.find((k) => k.plural === rest[0]);
      if (served === undefined) return this.status(res, 404, 'NotFound', `${url.pathname} not found`);
      const labels = labelPredicate(url.searchParams.get('labelSelector'));
      const fields = fieldPredicate(url.searchParams.get('fieldSelector'));
      const matches = (o: KubeObject): boolean =>
        (namespace === undefined || o.metadata.namespace === namespace) &&
        labels(o.metadata.labels ?? {}) &&
        fields(o);
      if (rest.length === 2) {
        const found = this.objects.get(this.storeKey(served))!.get(`${namespace ?? ''}/${rest[1]!}`);
        if (found === undefined)
          return this.status(res, 404, 'NotFound', `${served.plural} "${rest[1]!}" not found`);
        return this.json(res, atVersion(found, { served, version }));
      }
      if (rest.length !== 1) return this.status(res, 404, 'NotFound', `${url.pathname} not found`);
      const watch = url.searchParams.get('watch');
      const isWatch = watch === 'true' || watch === '1';
      const slowMs = isWatch ? undefined : this.slow.get(served.plural);
      if (slowMs !== undefined && !late) {
        setTimeout(() => this.handle(req, res, true), slowMs);
        return;
      }
      const fault = this.faults.get(`${served.plural} ${isWatch ? 'watch' : 'list'}`);
      if (fault !== undefined && (fault !== 'empty' || isWatch)) return this.injected(res, fault);
      if (isWatch) return this.watch(req, res, url, { served, version, namespace, matches });
      if (fault === 'empty') {
        return this.json(res, {
          apiVersion: `${group}/${version}`,
          kind: `${served.kind}List`,
          metadata: { resourceVersion: String(this.rv) },
          items: [],
        });
      }
      // A paged list reads one snapshot: later pages come from it, as etcd serves them at the first
      // page's revision, until a compaction expires the continue token (410).
      const token = url.searchParams.get('continue');
      let snapshot: { readonly rv: number; readonly items: readonly KubeObject[] } | undefined;
      let offset = 0;
      if (token !== null && token !== '') {
        const paged = this.expireContinue ? undefined : this.pagedLists.get(token);
        this.expireContinue = false;
        if (paged === undefined)
          return this.status(res, 410, 'Expired', 'The provided continue parameter is too old');
        this.pagedLists.delete(token);
        snapshot = paged.snapshot;
        offset = paged.offset;
      } else {
        snapshot = {
          rv: this.rv,
          items: [...this.objects.get(this.storeKey(served))!.values()]
            .filter(matches)
            .map((o) => atVersion(o, { served, version })),
        };
      }
      const lagMs = token === null || token === '' ? this.lagging.get(served.plural) : undefined;
      if (lagMs !== undefined) this.lagging.delete(served.plural);
      const limit = Number(url.searchParams.get('limit') ?? '0');
      const end = limit > 0 ? offset + limit : snapshot.items.length;
      const metadata: { resourceVersion: string; continue?: string } = {
        resourceVersion: String(snapshot.rv),
      };
      if (end < snapshot.items.length) {
        const next = `page-${++this.pageTokens}`;
        this.pagedLists.set(next, { snapshot, offset: end });
        metadata.continue = next;
      }
      const body = {
        apiVersion: `${group}/${version}`,
        kind: `${served.kind}List`,
        metadata,
        items: snapshot.items.slice(offset, end),
      };
      if (lagMs === undefined) return this.json(res, body);
      setTimeout(() => this.json(res, body), lagMs);
      return;
    } catch (err) {
      return this.status(res, 400, 'BadRequest', err instanceof Error ? err.message : String(err));
    }
  }

  private watch(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    target: Omit<Watcher, 'response'>,
  ): void {
    const from = url.searchParams.get('resourceVersion') ?? '';
    const sinceRv = from === '' || from === '0' ? undefined : Number(from);
    if (sinceRv !== undefined && (!Number.isFinite(sinceRv) || sinceRv < this.compactedBelow)) {
      return this.status(res, 410, 'Expired', `too old resource version: ${from} (${this.compactedBelow})`);
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const watcher: Watcher = { ...target, response: res };
    if (sinceRv === undefined) {
      for (const o of this.objects.get(this.storeKey(target.served))!.values()) {
        if (target.matches(o)) this.writeEvent(watcher, { type: 'ADDED', object: atVersion(o, target) });
      }
    } else {
      for (const e of this.log) {
        if (
          e.rv > sinceRv &&
          this.objects.has(this.storeKey(target.served)) &&
          this.kindOf(e.object) === target.served &&
          target.matches(e.object)
        ) {
          this.writeEvent(watcher, { type: e.type, object: atVersion(e.object, target) });
        }
      }
    }
    this.watchers.add(watcher);
    const timeoutSeconds = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    const timer = timeoutSeconds > 0 ? setTimeout(() => res.end(), timeoutSeconds * 1000) : undefined;
    const done = (): void => {
      if (timer !== undefined) clearTimeout(timer);
      this.watchers.delete(watcher);
    };
    res.on('close', done);
    req.on('close', done);
  }

  private injected(res: ServerResponse, fault: KubeFault): void {
    if (typeof fault === 'number')
      return this.status(res, fault, 'Injected', `injected ${fault} (a fault of the test)`);
    if (fault === 'hang') return;
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    if (fault === 'trickle') {
      res.flushHeaders();
      const timer = setInterval(() => res.write(' '), 100);
      res.on('close', () => clearInterval(timer));
      return;
    }
    res.end(fault === 'gone' ? `${toJson({ type: 'ERROR', object: goneStatus() })}\n` : undefined);
  }

  private kindOf(object: KubeObject): ServedKind | undefined {
    return this.kinds.find((k) => k.kind === object.kind);
  }

  private groups(): string[] {
    return [...new Set(this.kinds.map((k) => k.group))];
  }

  private groupDoc(group: string): unknown {
    const versions = [...new Set(this.kinds.filter((k) => k.group === group).flatMap((k) => k.versions))];
    const preferred = this.kinds.find((k) => k.group === group)!.versions[0]!;
    return {
      kind: 'APIGroup',
      apiVersion: 'v1',
      name: group,
      versions: versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v })),
      preferredVersion: { groupVersion: `${group}/${preferred}`, version: preferred },
    };
  }

  private json(res: ServerResponse, body: unknown): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(toJson(body));
  }

  private status(res: ServerResponse, code: number, reason: string, message: string): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message,
        reason,
        code,
      }),
    );
  }
}

function atVersion(object: KubeObject, target: { served: ServedKind; version: string }): KubeObject {
  return { ...object, apiVersion: `${target.served.group}/${target.version}` };
}

function goneStatus(): unknown {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'too old resource version',
    reason: 'Expired',
    code: 410,
  };
}
