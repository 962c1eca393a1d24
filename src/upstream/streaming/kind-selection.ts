import { MeshmuxError } from '../../core/errors.js';
import { CONFIG_KINDS, KINDS, type KindDescriptor } from '../../schema/kinds.js';

/** A config kind by its name (`VirtualService`) or registry key (`networking.istio.io/VirtualService`). */
export function findKind(nameOrKey: string): KindDescriptor | undefined {
  return KINDS.get(nameOrKey) ?? CONFIG_KINDS.find((k) => k.kind === nameOrKey);
}

/**
 * The kinds a source subscribes to, in registry order (istiod's request order); every config
 * kind when `names` is absent. Throws a CONFIG error naming an unknown kind.
 */
export function selectKinds(names: readonly string[] | undefined, source: string): KindDescriptor[] {
  if (names === undefined) return [...CONFIG_KINDS];
  const wanted = new Set<KindDescriptor>();
  for (const name of names) {
    const kind = findKind(name);
    if (kind === undefined || kind === KINDS.meshConfig) {
      throw new MeshmuxError('CONFIG', `unknown kind "${name}"`, { file: source, field: 'kinds' });
    }
    wanted.add(kind);
  }
  return CONFIG_KINDS.filter((k) => wanted.has(k));
}
