/** An object as the Kubernetes API serves it (the parts meshmux reads). */
export interface KubernetesObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly resourceVersion?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
    readonly creationTimestamp?: string;
    readonly [key: string]: unknown;
  };
  readonly spec?: unknown;
}

/** Bookkeeping of `kubectl apply`, not config. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * The config document an API object stands for: apiVersion, kind, spec and the metadata istiod
 * reads (name, namespace, labels, annotations without `kubectl apply`'s copy, creationTimestamp
 * which becomes `create_time`). managedFields, uid, resourceVersion and the rest are dropped.
 */
export function configDocument(object: KubernetesObject): Record<string, unknown> {
  const meta = object.metadata ?? {};
  const annotations = { ...meta.annotations };
  delete annotations[LAST_APPLIED_ANNOTATION];
  const metadata: Record<string, unknown> = { name: meta.name };
  if (meta.namespace !== undefined) metadata['namespace'] = meta.namespace;
  if (meta.labels !== undefined && Object.keys(meta.labels).length > 0) metadata['labels'] = meta.labels;
  if (Object.keys(annotations).length > 0) metadata['annotations'] = annotations;
  if (meta.creationTimestamp !== undefined) metadata['creationTimestamp'] = meta.creationTimestamp;
  const document: Record<string, unknown> = { apiVersion: object.apiVersion, kind: object.kind, metadata };
  if (object.spec !== undefined) document['spec'] = object.spec;
  return document;
}
