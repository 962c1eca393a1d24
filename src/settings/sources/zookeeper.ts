import { z } from 'zod';
import { COMMON_SOURCE_FIELDS, Duration, Glob, HostPort } from './common.js';

/** Include and exclude globs over names (the dialect of `core/glob.ts`: `*` crosses `.` and `/`). */
const GlobLists = z.strictObject({
  include: z.array(Glob.min(1)).optional(),
  exclude: z.array(Glob.min(1)).optional(),
});

/** `host:port[,host:port...]`, as ZooKeeper clients write an ensemble. */
const Servers = z
  .string()
  .min(1)
  .refine(
    (text) => text.split(',').every((s) => HostPort.safeParse(s.trim()).success),
    'a comma-separated list of host:port',
  )
  .transform((text) =>
    text
      .split(',')
      .map((s) => s.trim())
      .join(','),
  );

const DigestAuth = z
  .strictObject({
    username: z.string().min(1),
    password: z.string().optional(),
    /** A file holding the password; read for every new session. */
    passwordFile: z.string().min(1).optional(),
  })
  .refine((a) => (a.password === undefined) !== (a.passwordFile === undefined), {
    message: 'give exactly one of password and passwordFile',
  });

/**
 * `type: zookeeper`: Dubbo providers registered in ZooKeeper (`<root>/<interface>/providers`),
 * served as ServiceEntries in `namespace`.
 */
export const ZookeeperSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('zookeeper'),
  servers: Servers,
  /** Dubbo's registry group; default `/dubbo`. */
  root: z
    .string()
    .regex(/^\/?[^\s]*$/, 'a ZooKeeper path such as /dubbo')
    .default('/dubbo'),
  /** Requested session timeout (the server bounds it to 2–20 ticks). */
  sessionTimeout: Duration.default(30_000),
  /** Digest authentication (`addauth digest user:password`). */
  auth: DigestAuth.optional(),
  /**
   * ServiceEntry host: `{interface}`, `{group}`, `{version}`, `{application}`, `{protocol}`,
   * literal text, and `[...]` segments left out when a placeholder in them is empty.
   */
  host: z.string().min(1).default('[{version}.][{group}.]{interface}'),
  /** Endpoints inside the ServiceEntry, or one WorkloadEntry each selected by the ServiceEntry. */
  endpoints: z.enum(['inline', 'workload-entries']).default('inline'),
  /** Interfaces to serve (globs on the interface name); others are not even watched. */
  interfaces: GlobLists.optional(),
  /** Providers to serve by their `application` parameter. */
  applications: GlobLists.optional(),
  /** URL parameters that become endpoint labels; default all but `timestamp` and `pid`. */
  labelParameters: GlobLists.optional(),
  /** Quiet time after a change before it is published. */
  debounce: Duration.default(50),
});

export type ZookeeperSourceConfig = z.infer<typeof ZookeeperSourceConfig>;
