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

/** Registrations per interface: znode name → its parse. The maps must not be altered. */
export type RegistryProviders = ReadonlyMap<string, ReadonlyMap<string, ProviderParse>>;

/** One build: every object, plus what was rejected (errors) or repaired or chosen (warnings). */
export interface DubboBuildResult {
  readonly resources: readonly ConfigResource[];
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
  /** ServiceEntries built (= services served). */
  readonly services: number;
}

interface ServiceGroup {
  /** `interface \0 group \0 version`: the service identity. */
  readonly key: string;
  readonly iface: string;
  readonly group: string;
  readonly version: string;
  /** Deduplicated by address and port, sorted by znode name. */
  readonly providers: readonly DubboProvider[];
}

interface Claim {
  readonly service: ServiceGroup;
  readonly host: string;
  readonly name: string;
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

const wallClockNow = (): Timestamp => timestampFromDate(new Date());

/**
 * Turns Dubbo registrations into ServiceEntries (and WorkloadEntries): one ServiceEntry per
 * (interface, group, version), STATIC, MESH_INTERNAL, one TCP port per distinct provider port.
 *
 * Generated hosts and names are checked for collisions across services: a colliding service is
 * reported and left out, never merged into another. The service that held the host in the
 * previous build keeps it, so a newcomer cannot take a host away from a running service; among
 * newcomers the first in (interface, group, version) order wins.
 *
 * Stateful only for speed and stability: a service whose registrations did not change reuses
 * its built objects, and every object keeps the createTime of its first build.
 */
export class DubboServiceBuilder {
  private cache = new Map<string, CachedService>();
  private createTimes = new Map<string, Timestamp>();
  private hostOwners = new Map<string, string>();
  private nameOwners = new Map<string, string>();
  /** Rendered hosts by service and the fields the template may use: rendering is pure. */
  private hosts = new Map<string, HostResult>();

  constructor(
    private readonly options: DubboServiceBuilderOptions,
    private readonly now: () => Timestamp = wallClockNow,
  ) {}

  /** Builds the full state for `registry`. */
  build(registry: RegistryProviders): DubboBuildResult {
    const errors: MeshmuxError[] = [];
    const warnings: MeshmuxError[] = [];
    const services = this.groupServices(registry, errors, warnings);
    const claims = this.claimHostsAndNames(services, errors);
    const resources: ConfigResource[] = [];
    const nextCache = new Map<string, CachedService>();
    const usedKeys = new Set<string>();
    const workloadNames = new Map<string, string>();
    for (const claim of claims) {
      let built = this.cache.get(claim.service.key);
      if (built === undefined || !builtFrom(built, claim)) built = this.buildService(claim);
      nextCache.set(claim.service.key, built);
      appendAll(warnings, built.warnings);
      for (const r of built.resources) {
        if (r.kind === WORKLOAD_ENTRY_KIND) {
          // Names are derived from distinct service names, but two derivations could still meet.
          const holder = workloadNames.get(r.name);
          if (holder !== undefined) {
            errors.push(
              this.error(
                'METADATA',
                claim.service,
                `WorkloadEntry name ${r.name} is generated for both ${holder} and ${describe(claim.service)}; the second is not served`,
              ),
            );
            continue;
          }
          workloadNames.set(r.name, describe(claim.service));
        }
        usedKeys.add(resourceKey(r));
        resources.push(r);
      }
    }
    this.cache = nextCache;
    for (const key of [...this.createTimes.keys()]) if (!usedKeys.has(key)) this.createTimes.delete(key);
    return { resources, errors, warnings, services: claims.length };
  }

  /** Valid, selected providers grouped by (interface, group, version), sorted by that key. */
  private groupServices(
    registry: RegistryProviders,
    errors: MeshmuxError[],
    warnings: MeshmuxError[],
  ): ServiceGroup[] {
    const groups = new Map<
      string,
      { iface: string; group: string; version: string; list: DubboProvider[] }
    >();
    for (const iface of [...registry.keys()].sort()) {
      const nodes = registry.get(iface) ?? new Map<string, ProviderParse>();
      for (const node of [...nodes.keys()].sort()) {
        const parsed = nodes.get(node);
        if (parsed === undefined) continue;
        if (!parsed.ok) {
          errors.push(
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
        if (g === undefined)
          groups.set(key, (g = { iface: p.interface, group: p.group, version: p.version, list: [] }));
        g.list.push(p);
      }
    }
    const out: ServiceGroup[] = [];
    for (const key of [...groups.keys()].sort()) {
      const g = groups.get(key);
      if (g === undefined) continue;
      const service = { key, iface: g.iface, group: g.group, version: g.version, providers: [] };
      out.push({ ...service, providers: this.dedupe(service, g.list, warnings) });
    }
    return out;
  }

  /**
   * One provider per address and port. Two arise when a provider restarts faster than its old
   * session expires: the newer registration (higher `timestamp`, then later name) wins.
   */
  private dedupe(
    service: ServiceGroup,
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

  /** Renders hosts and names and settles collisions; returns the services that may be served. */
  private claimHostsAndNames(services: readonly ServiceGroup[], errors: MeshmuxError[]): Claim[] {
    const rendered: Claim[] = [];
    const hosts = new Map<string, HostResult>();
    for (const service of services) {
      const first = service.providers[0];
      if (first === undefined) continue;
      const renderKey = `${service.key}\0${first.application}\0${first.protocol}`;
      const result =
        this.hosts.get(renderKey) ??
        this.options.hostTemplate.render({
          interface: service.iface,
          group: service.group,
          version: service.version,
          application: first.application,
          protocol: first.protocol,
        });
      hosts.set(renderKey, result);
      if ('error' in result) {
        errors.push(
          this.error('SCHEMA', service, `cannot make a valid host: ${result.error}`, 'spec.hosts[0]'),
        );
        continue;
      }
      rendered.push({ service, host: result.host, name: boundedName(result.host, MAX_OBJECT_NAME) });
    }
    const byHost = settle(
      rendered,
      (c) => c.host,
      this.hostOwners,
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
      this.nameOwners,
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
    this.hosts = hosts;
    this.hostOwners = new Map(byName.map((c) => [c.host, c.service.key]));
    this.nameOwners = new Map(byName.map((c) => [c.name, c.service.key]));
    return byName;
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
    service: ServiceGroup,
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

function serviceKey(iface: string, group: string, version: string): string {
  return `${iface}\0${group}\0${version}`;
}

function describe(service: Pick<ServiceGroup, 'iface' | 'group' | 'version'>): string {
  return `${service.iface} (group "${service.group}", version "${service.version}")`;
}

/** Dubbo's `timestamp` parameter (ms since epoch at export), or 0. */
function registrationTime(p: DubboProvider): number {
  const t = Number(p.parameters['timestamp']);
  return Number.isFinite(t) ? t : 0;
}

/**
 * Keeps one claimant per value of `keyOf`: the previous owner if it still claims, otherwise
 * the first in order. Calls `lost` for every other claimant. Returns the winners in input order.
 */
function settle(
  claims: readonly Claim[],
  keyOf: (c: Claim) => string,
  previousOwners: ReadonlyMap<string, string>,
  lost: (winner: Claim, loser: Claim) => void,
): Claim[] {
  const byValue = new Map<string, Claim[]>();
  for (const c of claims) {
    const list = byValue.get(keyOf(c));
    if (list === undefined) byValue.set(keyOf(c), [c]);
    else list.push(c);
  }
  const winners = new Set<Claim>();
  for (const [value, list] of byValue) {
    const previous = previousOwners.get(value);
    const winner = list.find((c) => c.service.key === previous) ?? list[0];
    if (winner === undefined) continue;
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
