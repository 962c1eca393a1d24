import { z } from 'zod';
import { CONFIG_KINDS } from '../../schema/kinds.js';
import { COMMON_SOURCE_FIELDS, Glob } from './common.js';

const KIND_NAMES = CONFIG_KINDS.map((k) => k.kind) as [string, ...string[]];

/**
 * `type: kubernetes`: the Istio objects of one cluster's API server, listed then watched. Without
 * `kubeconfig` the in-cluster service account is used.
 */
export const KubernetesSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('kubernetes'),
  /** A kubeconfig file; absent: the in-cluster service account. */
  kubeconfig: z.string().min(1).optional(),
  /** The kubeconfig context to use; default its current context. */
  context: z.string().min(1).optional(),
  /** Namespaces to read (globs); default all. */
  namespaces: z.array(Glob.min(1)).min(1).optional(),
  /** A Kubernetes label selector applied by the API server. */
  labelSelector: z.string().min(1).optional(),
  /** Kinds to read; default every Istio kind. */
  kinds: z.array(z.enum(KIND_NAMES)).min(1).optional(),
});

export type KubernetesSourceConfig = z.infer<typeof KubernetesSourceConfig>;
