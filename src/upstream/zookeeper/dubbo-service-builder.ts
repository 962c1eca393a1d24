import { MeshmuxError } from '../../core/errors.js';
import { isCredentialName } from '../../core/secrets.js';
import {
  makeResource,
  resourceKey,
  timestampFromDate,
  type ConfigResource,
  type Timestamp,
} from '../../core/resource.js';
import { messageType } from '../../schema/proto-root.js';
import { boundedName, dnsLabel, MAX_OBJECT_NAME } from './dns-names.js';
import type { DubboProvider, ProviderParse } from './dubbo-provider-url.js';
import type { DubboHostTemplate } from './dubbo-host-template.js';
import type { GlobSelector } from './glob-selector.js';
import { labelsFromParameters } from './kubernetes-labels.js';
import { appendAll } from '../../core/append-all.js';
import { ContentDigest } from '../../core/content-digest.js';
import { firstAtOrAfter } from '../../core/first-at-or-after.js';

export const SERVICE_ENTRY_KIND = 'networking.istio.io/ServiceEntry';
export const WORKLOAD_ENTRY_KIND = 'networking.istio.io/WorkloadEntry';

/** Label tying separate WorkloadEntries to their ServiceEntry's `workloadSelector`. */
export const SERVICE_SELECTOR_LABEL = 'meshmux.io/dubbo-service';
/** Annotations that keep the Dubbo identity the (lossy) host was made from. */
export const INTERFACE_ANNOTATION = 'meshmux.io/dubbo-interface';
export const GROUP_ANNOTATION = 'meshmux.io/dubbo-group';
export const VERSION_ANNOTATION = 'meshmux.io/dubbo-version';

/** Where a service's endpoints go: inside the ServiceEntry, or one WorkloadEntry each. */
export type EndpointMode = 'inline' | 'workload-entries';

export interface DubboServiceBuilderOptions {
  /** Namespace of every generated object. */
  readonly namespace: string;
  readonly hostTemplate: DubboHostTemplate;
  readonly endpoints: EndpointMode;
  /** Providers whose `application` it rejects are left out. */
  readonly applications: GlobSelector;
  /** URL parameters it accepts become endpoint labels. */
  readonly labelParameters: GlobSelector;
  /** The registry root, e.g. `/dubbo`: errors name znode paths below it. */
  readonly root: string;
  /** Prefix of `origin.file`, e.g. `zookeeper://10.0.0.5:2181`. */
  readonly originPrefix: string;
}

/**
 * Registrations per interface: znode name → its parse. An interface's map must not be altered: a
 * change of its registrations is a new map (the builder reuses what it made from a map it has
 * seen). The outer map may change between builds.
 */
export type RegistryProviders = ReadonlyMap<string, ReadonlyMap<string, ProviderParse>>;

/** One build: every object, plus what was rejected (errors) or repaired or chosen (warnings). */
export interface DubboBuildResult {
  readonly resources: readonly ConfigResource[];
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
  /** ServiceEntries built (= services served). */
  readonly services: number;
  /**
   * A digest of the objects served, independent of their order: equal for equal objects on every
   * replica and after every restart. Kept up to date with the interfaces that changed.
   */
  readonly revision: string;
}

interface ServiceIdentity {
  /** `interface \0 group \0 version`. */
  readonly key: string;
  readonly iface: string;
  readonly group: string;
  readonly version: string;
}

interface ServiceGroup extends ServiceIdentity {
  /** Deduplicated by address and port, sorted by znode name. */
  readonly providers: readonly DubboProvider[];
}

interface Claim {
  readonly service: ServiceGroup;
  readonly host: string;
  readonly name: string;
  /** When the registry says the service came: its oldest provider's registration time, if any. */
  readonly since: number;
}

type HostResult = ReturnType<DubboHostTemplate['render']>;

interface CachedService {
  /** What it was built from; a znode name determines its provider, so names are compared. */
  readonly host: string;
  readonly name: string;
  readonly providers: readonly DubboProvider[];
  readonly resources: readonly ConfigResource[];
  readonly warnings: readonly MeshmuxError[];
}

/**
 * What one interface's registrations became, kept while they stay the same map: its services
 * (every service key begins with the interface, so none spans two), the claims their hosts make,
 * and the objects of those that won their host and name.
 */
interface InterfaceBuild {
  readonly parses: ReadonlyMap<string, ProviderParse>;
  /** Registrations that do not parse, in znode order. */
  readonly parseErrors: readonly MeshmuxError[];
  /** Providers registered twice, in service order. */
  readonly dedupeWarnings: readonly MeshmuxError[];
  /** Services whose host the template cannot make valid, in service order. */
  readonly renderErrors: readonly MeshmuxError[];
  /** Rendered hosts by service and the fields the template may use: rendering is pure. */
  readonly renders: ReadonlyMap<string, HostResult>;
  /** One per service whose host rendered, in service order. */
  readonly claims: readonly Claim[];
  /** The objects served, made for the losers of the last settling (undefined until made). */
  output: InterfaceOutput | undefined;
  /** The services the interface's last output built, to reuse until this one's output is made. */
  previous: ReadonlyMap<string, CachedService> | undefined;
}

interface InterfaceOutput {
  /** The set of services left out by collisions it was made for (compared by identity). */
  readonly losers: ReadonlySet<string>;
  /** Built services by key: reused while their claim is built from the same registrations. */
  readonly built: ReadonlyMap<string, CachedService>;
  /** The objects of the services that won, in service order. */
  readonly resources: readonly ConfigResource[];
  /** The service each object was built for, by position. */
  readonly owners: readonly ServiceGroup[];
  /** Their build warnings, in the same order. */
  readonly warnings: readonly MeshmuxError[];
  /** Services built (one ServiceEntry each). */
  readonly services: number;
}

const NO_LOSERS: ReadonlySet<string> = new Set();

const wallClockNow = (): Timestamp => timestampFromDate(new Date());

/**
 * Turns Dubbo registrations into ServiceEntries (and WorkloadEntries): one ServiceEntry per
 * (interface, group, version), STATIC, MESH_INTERNAL, one TCP port per distinct provider port.
 *
 * Generated hosts and names are checked for collisions across services: a colliding service is
 * reported and left out, never merged into another. The service registered first keeps the host
 * (the oldest `timestamp` of its providers; services without one come after), so a newcomer
 * cannot take a host away from a running service; on a tie the first in (interface, group,
 * version) order wins. The registry alone decides: every replica, and a restarted one, agrees.
 *
 * Stateful for speed and stability: an interface whose registrations are the same map as in the
 * last build is not looked at again (its services, hosts and objects are reused), collisions are
 * settled again only when a service, host or name came or went, and every object keeps the
 * createTime of its first build. A provider added to one interface among 10k costs the build of
 * that interface and a walk of the interfaces' lists.
 */
export class DubboServiceBuilder {
  /** Per interface of the last build. */
  private readonly interfaces = new Map<string, InterfaceBuild>();
  /** The interfaces of the last build, sorted. */
  private sorted: readonly string[] = [];
  private createTimes = new Map<string, Timestamp>();
  /** Keys of the services the last settling of collisions left out, and its errors. */
  private losers: ReadonlySet<string> = NO_LOSERS;
  private collisionErrors: readonly MeshmuxError[] = [];
  /** How many claims make each host, and each name: see {@link ClaimChanges}. */
  private readonly hostClaims = new Map<string, number>();
  private readonly nameClaims = new Map<string, number>();
  /**
   * Of the objects the interfaces' outputs hold (before WorkloadEntry names are checked), by name
   * and version: their creation times are this builder's clock's.
   */
  private readonly digest = new ContentDigest(false);

  constructor(
    private readonly options: DubboServiceBuilderOptions,
    private readonly now: () => Timestamp = wallClockNow,
  ) {}

  /** Builds the full state for `registry`. */
  build(registry: RegistryProviders): DubboBuildResult {
    const claims = new ClaimChanges(this.hostClaims, this.nameClaims);
    const came: string[] = [];
    /** Outputs replaced or dropped this build: their objects' creation times may go. */
    const replaced: InterfaceOutput[] = [];
    registry.forEach((parses, iface) => {
      const before = this.interfaces.get(iface);
      if (before === undefined) came.push(iface);
      else if (before.parses === parses) return;
      const next = this.interfaceBuild(iface, parses, before);
      claims.replace(before?.claims ?? NO_CLAIMS, next.claims);
      this.interfaces.set(iface, next);
      if (before?.output !== undefined) replaced.push(before.output);
    });
    const gone: string[] = [];
    if (registry.size !== this.interfaces.size) {
      for (const [iface, before] of this.interfaces) {
        if (registry.has(iface)) continue;
        this.interfaces.delete(iface);
        gone.push(iface);
        claims.replace(before.claims, NO_CLAIMS);
        if (before.output !== undefined) replaced.push(before.output);
      }
    }
    if (came.length > 0 || gone.length > 0) this.sorted = resorted(this.sorted, came, gone);
    const interfaces = this.sorted.map((iface) => this.interfaces.get(iface) as InterfaceBuild);
    // A claim alone with its host and name, before and after, wins them and changes no other outcome.
    if (claims.changed && !claims.alone()) this.settle(interfaces);

    const errors: MeshmuxError[] = [];
    const warnings: MeshmuxError[] = [];
    for (const entry of interfaces) appendAll(errors, entry.parseErrors);
    for (const entry of interfaces) appendAll(errors, entry.renderErrors);
    appendAll(errors, this.collisionErrors);
    for (const entry of interfaces) appendAll(warnings, entry.dedupeWarnings);

    const added: InterfaceOutput[] = [];
    const resources: ConfigResource[] = [];
    // Names are derived from distinct service names, but two derivations could still meet.
    const workloadNames =
      this.options.endpoints === 'workload-entries' ? new Map<string, string>() : undefined;
    const skipped: ConfigResource[] = [];
    let services = 0;
    for (const entry of interfaces) {
      let output = entry.output;
      if (output === undefined || output.losers !== this.losers) {
        // An output made for other losers is this entry's own: not among the replaced ones yet.
        if (output !== undefined) replaced.push(output);
        output = this.interfaceOutput(entry, output?.built ?? entry.previous);
        entry.output = output;
        entry.previous = undefined;
        added.push(output);
      }
      services += output.services;
      appendAll(warnings, output.warnings);
      if (workloadNames === undefined) {
        appendAll(resources, output.resources);
        continue;
      }
      for (let i = 0; i < output.resources.length; i++) {
        const r = output.resources[i] as ConfigResource;
        const service = output.owners[i] as ServiceGroup;
        if (r.kind === WORKLOAD_ENTRY_KIND) {
          const holder = workloadNames.get(r.name);
          if (holder !== undefined) {
            errors.push(
              this.error(
                'METADATA',
                service,
                `WorkloadEntry name ${r.name} is generated for both ${holder} and ${describe(service)}; the second is not served`,
              ),
            );
            skipped.push(r);
            continue;
          }
          workloadNames.set(r.name, describe(service));
        }
        resources.push(r);
      }
    }
    this.forgetReplaced(replaced, added);
    return { resources, errors, warnings, services, revision: this.revision(skipped) };
  }

  /**
   * What `parses`, the registrations of `iface`, become: valid, selected providers grouped by
   * (interface, group, version), sorted by that key, each service's host rendered (reusing the
   * renders of `before`, the interface's last build) and claimed.
   */
  private interfaceBuild(
    iface: string,
    parses: ReadonlyMap<string, ProviderParse>,
    before: InterfaceBuild | undefined,
  ): InterfaceBuild {
    const parseErrors: MeshmuxError[] = [];
    const dedupeWarnings: MeshmuxError[] = [];
    const groups = new Map<string, { group: string; version: string; list: DubboProvider[] }>();
    for (const node of [...parses.keys()].sort()) {
      const parsed = parses.get(node) as ProviderParse;
      if (!parsed.ok) {
        parseErrors.push(
          new MeshmuxError('DECODE', `bad provider registration: ${parsed.reason}`, {
            file: this.znodePath(iface, node),
          }),
        );
        continue;
      }
      const p = parsed.provider;
      if (!this.options.applications.matches(p.application)) continue;
      const key = serviceKey(p.interface, p.group, p.version);
      let g = groups.get(key);
      if (g === undefined) groups.set(key, (g = { group: p.group, version: p.version, list: [] }));
      g.list.push(p);
    }
    const renderErrors: MeshmuxError[] = [];
    const renders = new Map<string, HostResult>();
    const claims: Claim[] = [];
    for (const key of [...groups.keys()].sort()) {
      const g = groups.get(key) as { group: string; version: string; list: DubboProvider[] };
      const named = { key, iface, group: g.group, version: g.version };
      const service: ServiceGroup = { ...named, providers: this.dedupe(named, g.list, dedupeWarnings) };
      const first = service.providers[0];
      if (first === undefined) continue;
      const renderKey = `${key}\0${first.application}\0${first.protocol}`;
      const result =
        before?.renders.get(renderKey) ??
        this.options.hostTemplate.render({
          interface: iface,
          group: service.group,
          version: service.version,
          application: first.application,
          protocol: first.protocol,
        });
      renders.set(renderKey, result);
      if ('error' in result) {
        renderErrors.push(
          this.error('SCHEMA', service, `cannot make a valid host: ${result.error}`, 'spec.hosts[0]'),
        );
        continue;
      }
      claims.push({
        service,
        host: result.host,
        name: boundedName(result.host, MAX_OBJECT_NAME),
        since: registeredSince(service.providers),
      });
    }
    return {
      parses,
      parseErrors,
      dedupeWarnings,
      renderErrors,
      renders,
      claims,
      output: undefined,
      previous: before?.output?.built ?? before?.previous,
    };
  }

  /**
   * One provider per address and port. Two arise when a provider restarts faster than its old
   * session expires: the newer registration (higher `timestamp`, then later name) wins.
   */
  private dedupe(
    service: ServiceIdentity,
    list: readonly DubboProvider[],
    warnings: MeshmuxError[],
  ): DubboProvider[] {
    const byEndpoint = new Map<string, DubboProvider>();
    for (const p of list) {
      const at = `${p.address}|${p.port}`;
      const earlier = byEndpoint.get(at);
      if (earlier === undefined) {
        byEndpoint.set(at, p);
        continue;
      }
      const newer = registrationTime(p) >= registrationTime(earlier) ? p : earlier;
      byEndpoint.set(at, newer);
      warnings.push(
        this.error(
          'METADATA',
          service,
          `${p.address} port ${p.port} is registered twice for ${describe(service)}; the newer registration is used`,
        ),
      );
    }
    return [...byEndpoint.values()].sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  }

  /**
   * Settles collisions of hosts, then of names, over the claims of every interface (in service
   * order): sets the services left out, the errors that say so, and the owners the next settling
   * starts from.
   */
  private settle(interfaces: readonly InterfaceBuild[]): void {
    const claims: Claim[] = [];
    for (const entry of interfaces) appendAll(claims, entry.claims);
    const errors: MeshmuxError[] = [];
    const byHost = settle(
      claims,
      (c) => c.host,
      (winner, loser) =>
        errors.push(
          this.error(
            'METADATA',
            loser.service,
            `host ${loser.host} is also generated for ${describe(winner.service)}, which holds it; ${describe(loser.service)} is not served`,
            'spec.hosts[0]',
          ),
        ),
    );
    const byName = settle(
      byHost,
      (c) => c.name,
      (winner, loser) =>
        errors.push(
          this.error(
            'METADATA',
            loser.service,
            `ServiceEntry name ${loser.name} is also generated for ${describe(winner.service)}, which holds it; ${describe(loser.service)} is not served`,
            'metadata.name',
          ),
        ),
    );
    this.collisionErrors = errors;
    if (byName.length === claims.length) {
      // Nothing left out (nearly always): a new empty set only when the last one was not, so
      // that outputs made for it are made again.
      if (this.losers.size > 0) this.losers = new Set();
      return;
    }
    const winners = new Set(byName);
    const losers = new Set<string>();
    for (const c of claims) if (!winners.has(c)) losers.add(c.service.key);
    // The same services left out as before: the outputs made for them stand.
    if (losers.size !== this.losers.size || [...losers].some((key) => !this.losers.has(key))) {
      this.losers = losers;
    }
  }

  /**
   * The objects of `entry`'s services that won their host and name, reusing the services of
   * `built` (its last output) still built from the same registrations.
   */
  private interfaceOutput(
    entry: InterfaceBuild,
    built: ReadonlyMap<string, CachedService> | undefined,
  ): InterfaceOutput {
    const losers = this.losers;
    const kept = new Map<string, CachedService>();
    const resources: ConfigResource[] = [];
    const owners: ServiceGroup[] = [];
    const warnings: MeshmuxError[] = [];
    for (const claim of entry.claims) {
      if (losers.has(claim.service.key)) continue;
      let service = built?.get(claim.service.key);
      if (service === undefined || !builtFrom(service, claim)) service = this.buildService(claim);
      kept.set(claim.service.key, service);
      appendAll(warnings, service.warnings);
      for (const r of service.resources) {
        resources.push(r);
        owners.push(claim.service);
      }
    }
    return { losers, built: kept, resources, owners, warnings, services: kept.size };
  }

  /**
   * Lets go of the creation times of objects no output holds any more (those of `replaced`
   * outputs that none of `added` holds: an object's key is in one output at most), and keeps the
   * digest of the outputs' objects up to date.
   */
  private forgetReplaced(replaced: readonly InterfaceOutput[], added: readonly InterfaceOutput[]): void {
    const gone = new Set<string>();
    for (const output of replaced) {
      for (const r of output.resources) {
        this.digest.remove(r);
        gone.add(resourceKey(r));
      }
    }
    for (const output of added) {
      for (const r of output.resources) {
        this.digest.add(r);
        gone.delete(resourceKey(r));
      }
    }
    for (const key of gone) this.createTimes.delete(key);
  }

  /** The revision of what is served: the outputs' digest, less the objects `skipped`. */
  private revision(skipped: readonly ConfigResource[]): string {
    if (skipped.length === 0) return this.digest.version();
    const served = this.digest.clone();
    for (const r of skipped) served.remove(r);
    return served.version();
  }

  private buildService(claim: Claim): CachedService {
    const { service, host, name } = claim;
    const mode = this.options.endpoints;
    const warnings: MeshmuxError[] = [];
    const ports = servicePorts(service.providers);
    if (ports.mixed) {
      warnings.push(
        this.error(
          'SCHEMA',
          service,
          `${describe(service)} mixes protocols (${ports.protocols.join(', ')}); istiod sends every endpoint to every port, so clients of one protocol may reach providers of another`,
          'spec.ports',
        ),
      );
    }
    const selector = boundedName(name, 63);
    const endpoints = service.providers.map((p) => {
      // A credential never becomes a label, whatever labelParameters says: labels reach every
      // istiod and every Envoy's endpoint metadata.
      const labels = labelsFromParameters(
        p.parameters,
        (k) => !isCredentialName(k) && this.options.labelParameters.matches(k),
      );
      if (mode === 'workload-entries') labels[SERVICE_SELECTOR_LABEL] = selector;
      return {
        provider: p,
        body: {
          address: p.address,
          ports: endpointPorts(p, ports.list),
          labels: sortedRecord(labels),
          ...(p.weight === undefined ? {} : { weight: p.weight }),
        },
      };
    });
    endpoints.sort((a, b) => compareEndpoints(a.provider, b.provider));
    const annotations: Record<string, string> = { [INTERFACE_ANNOTATION]: service.iface };
    if (service.group !== '') annotations[GROUP_ANNOTATION] = service.group;
    if (service.version !== '') annotations[VERSION_ANNOTATION] = service.version;
    const spec: Record<string, unknown> = {
      hosts: [host],
      ports: ports.list.map((p) => ({ number: p.number, protocol: 'TCP', name: p.name })),
      location: 'MESH_INTERNAL',
      resolution: 'STATIC',
    };
    if (mode === 'inline') spec['endpoints'] = endpoints.map((e) => e.body);
    else spec['workload_selector'] = { labels: { [SERVICE_SELECTOR_LABEL]: selector } };
    const origin = { file: `${this.options.originPrefix}${this.options.root}/${service.iface}/providers` };
    const resources: ConfigResource[] = [
      this.resource(SERVICE_ENTRY_KIND, name, {}, annotations, encode('ServiceEntry', spec), origin),
    ];
    if (mode === 'workload-entries') {
      for (const e of endpoints) {
        const p = e.provider;
        const weName = boundedName(`${name}-${dnsLabel(p.address)}-${p.port}`, MAX_OBJECT_NAME);
        resources.push(
          this.resource(
            WORKLOAD_ENTRY_KIND,
            weName,
            e.body.labels,
            annotations,
            encode('WorkloadEntry', e.body),
            {
              file: `${origin.file}/${p.node}`,
            },
          ),
        );
      }
    }
    return { host, name, providers: service.providers, resources, warnings };
  }

  private resource(
    kind: string,
    name: string,
    labels: Readonly<Record<string, string>>,
    annotations: Readonly<Record<string, string>>,
    body: Uint8Array,
    origin: { readonly file: string },
  ): ConfigResource {
    const namespace = this.options.namespace;
    const key = resourceKey({ kind, namespace, name });
    let createTime = this.createTimes.get(key);
    if (createTime === undefined) this.createTimes.set(key, (createTime = this.now()));
    return makeResource({
      kind,
      namespace,
      name,
      labels,
      annotations,
      createTime,
      body,
      origin: { ...origin, createTimeStamped: true },
    });
  }

  private error(
    code: 'METADATA' | 'SCHEMA',
    service: ServiceIdentity,
    reason: string,
    field?: string,
  ): MeshmuxError {
    return new MeshmuxError(code, reason, {
      file: `${this.options.root}/${service.iface}/providers`,
      ...(field === undefined ? {} : { field }),
    });
  }

  private znodePath(iface: string, node: string): string {
    return `${this.options.root}/${iface}/providers/${node}`;
  }
}

/** Whether `built` was made from exactly this claim's host, name and provider registrations. */
function builtFrom(built: CachedService, claim: Claim): boolean {
  const providers = claim.service.providers;
  return (
    built.host === claim.host &&
    built.name === claim.name &&
    built.providers.length === providers.length &&
    built.providers.every((p, i) => p.node === providers[i]?.node)
  );
}

const NO_CLAIMS: readonly Claim[] = [];

/**
 * The claims of the interfaces a build made again, as they went and came, with the count of
 * claims per host and per name (kept by the builder) brought up to date.
 */
class ClaimChanges {
  readonly went: Claim[] = [];
  readonly came: Claim[] = [];
  /** A claim that went shared its host or name with another claim. */
  private shared = false;

  constructor(
    private readonly hosts: Map<string, number>,
    private readonly names: Map<string, number>,
  ) {}

  /** Whether any claim went or came (an interface's claims other than they were). */
  get changed(): boolean {
    return this.went.length > 0 || this.came.length > 0;
  }

  /** An interface's claims `before` replaced by `next`. */
  replace(before: readonly Claim[], next: readonly Claim[]): void {
    if (sameClaims(before, next)) return;
    for (const c of before) {
      if ((this.hosts.get(c.host) ?? 0) > 1 || (this.names.get(c.name) ?? 0) > 1) this.shared = true;
      counted(this.hosts, c.host, -1);
      counted(this.names, c.name, -1);
      this.went.push(c);
    }
    for (const c of next) {
      counted(this.hosts, c.host, 1);
      counted(this.names, c.name, 1);
      this.came.push(c);
    }
  }

  /** Whether every claim that went or came was, and is, alone with its host and its name. */
  alone(): boolean {
    if (this.shared) return false;
    for (const c of this.came) {
      if ((this.hosts.get(c.host) ?? 0) > 1 || (this.names.get(c.name) ?? 0) > 1) return false;
    }
    return true;
  }
}

function counted(counts: Map<string, number>, key: string, by: 1 | -1): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n === 0) counts.delete(key);
  else counts.set(key, n);
}

/** `sorted` with the strings of `came` put in their places and those of `gone` taken out. */
function resorted(sorted: readonly string[], came: readonly string[], gone: readonly string[]): string[] {
  // A few in and out (an interface registered or left): put in place; many: sorted anew.
  if (came.length + gone.length > 64) {
    const left = new Set(gone);
    const out = sorted.filter((s) => !left.has(s));
    appendAll(out, came);
    return out.sort();
  }
  const out = [...sorted];
  for (const s of gone) out.splice(firstAtOrAfter(out, s), 1);
  for (const s of came) out.splice(firstAtOrAfter(out, s), 0, s);
  return out;
}

/** Whether two lists of claims claim the same hosts and names for the same services, in order. */
function sameClaims(a: readonly Claim[], b: readonly Claim[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as Claim;
    const y = b[i] as Claim;
    if (x.service.key !== y.service.key || x.host !== y.host || x.name !== y.name || x.since !== y.since) {
      return false;
    }
  }
  return true;
}

function serviceKey(iface: string, group: string, version: string): string {
  return `${iface}\0${group}\0${version}`;
}

function describe(service: ServiceIdentity): string {
  return `${service.iface} (group "${service.group}", version "${service.version}")`;
}

/** Dubbo's `timestamp` parameter (ms since epoch at export), or 0. */
function registrationTime(p: DubboProvider): number {
  const t = Number(p.parameters['timestamp']);
  return Number.isFinite(t) ? t : 0;
}

/**
 * The registration time of a service's oldest provider that states one; infinity when none
 * does, so that a service the registry dates comes before one it does not.
 */
function registeredSince(providers: readonly DubboProvider[]): number {
  let since = Number.POSITIVE_INFINITY;
  for (const p of providers) {
    const t = registrationTime(p);
    if (t > 0 && t < since) since = t;
  }
  return since;
}

/**
 * Keeps one claimant per value of `keyOf`: the one registered first (see {@link Claim.since}),
 * on a tie the first in order. Calls `lost` for every other claimant. Returns the winners in
 * input order.
 */
function settle(
  claims: readonly Claim[],
  keyOf: (c: Claim) => string,
  lost: (winner: Claim, loser: Claim) => void,
): Claim[] {
  const byValue = new Map<string, Claim[]>();
  for (const c of claims) {
    const list = byValue.get(keyOf(c));
    if (list === undefined) byValue.set(keyOf(c), [c]);
    else list.push(c);
  }
  const winners = new Set<Claim>();
  for (const list of byValue.values()) {
    let winner = list[0];
    if (winner === undefined) continue;
    for (const c of list) if (c.since < winner.since) winner = c;
    winners.add(winner);
    for (const c of list) if (c !== winner) lost(winner, c);
  }
  return claims.filter((c) => winners.has(c));
}

interface ServicePortSpec {
  readonly number: number;
  readonly name: string;
  readonly protocol: string;
}

/**
 * One port per distinct provider port, ascending. Named `tcp-<protocol>` when there is one,
 * `tcp-<protocol>-<number>` when there are several, so names stay unique.
 */
function servicePorts(providers: readonly DubboProvider[]): {
  list: ServicePortSpec[];
  protocols: string[];
  mixed: boolean;
} {
  const protocolsByPort = new Map<number, Set<string>>();
  for (const p of providers) {
    let set = protocolsByPort.get(p.port);
    if (set === undefined) protocolsByPort.set(p.port, (set = new Set()));
    set.add(p.protocol);
  }
  const numbers = [...protocolsByPort.keys()].sort((a, b) => a - b);
  const list = numbers.map((number) => {
    const protocol = [...(protocolsByPort.get(number) ?? [])].sort()[0] ?? 'dubbo';
    const label = dnsLabel(protocol) || 'dubbo';
    const name = numbers.length === 1 ? `tcp-${label}` : `tcp-${label}-${number}`;
    return { number, protocol, name: boundedName(name, 63) };
  });
  const protocols = [...new Set(providers.map((p) => p.protocol))].sort();
  return { list, protocols, mixed: protocols.length > 1 };
}

/**
 * The endpoint's `ports`: every service port of the provider's protocol leads to the provider's
 * own port, so a client using any of the service's ports reaches each provider where it listens.
 */
function endpointPorts(p: DubboProvider, ports: readonly ServicePortSpec[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const port of ports)
    if (port.protocol === p.protocol || port.number === p.port) out[port.name] = p.port;
  return sortedRecord(out);
}

function compareEndpoints(a: DubboProvider, b: DubboProvider): number {
  if (a.address !== b.address) return a.address < b.address ? -1 : 1;
  return a.port - b.port;
}

/** A copy with keys in sorted order: protobuf map entries are encoded in key order, so bytes are stable. */
function sortedRecord<V>(record: Readonly<Record<string, V>>): Record<string, V> {
  const out: Record<string, V> = {};
  for (const key of Object.keys(record).sort()) out[key] = record[key] as V;
  return out;
}

function encode(message: 'ServiceEntry' | 'WorkloadEntry', body: Record<string, unknown>): Uint8Array {
  const type = messageType(`istio.networking.v1alpha3.${message}`);
  return type.encode(type.fromObject(body)).finish();
}
