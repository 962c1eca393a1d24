/** What a fake upstream holds, per kind, with the resourceVersions and creation times a Kubernetes store gives. */
import { type KindDescriptor } from '../../src/schema/kinds.js';
import { kindNamed, type FakeObject } from './fake-objects.js';

/** Per object: the content it was last set with, its resourceVersion and its creation time. */
export interface StoredObject {
  readonly object: FakeObject;
  readonly json: string;
  readonly resourceVersion: string;
  readonly createTime: { seconds: number; nanos: number } | null;
}

/** The objects of an upstream, per kind, with Kubernetes-like resourceVersions. */
export class FakeStore {
  private readonly byKind = new Map<string, Map<string, StoredObject>>();
  private resourceVersion = 1000;
  private readonly created = new Map<string, { seconds: number; nanos: number }>();

  /** Replaces the objects of a kind; unchanged objects keep their resourceVersion. */
  set(kindName: string, objects: readonly FakeObject[]): void {
    const kind = kindNamed(kindName);
    const before = this.byKind.get(kind.key) ?? new Map<string, StoredObject>();
    const after = new Map<string, StoredObject>();
    for (const object of objects) {
      const key = `${object.namespace}/${object.name}`;
      const json = JSON.stringify([object.spec, object.labels, object.annotations, object.rawBody?.length]);
      const prev = before.get(key);
      let created = this.created.get(`${kind.key}|${key}`);
      if (created === undefined) {
        created = { seconds: 1_700_000_000 + this.created.size, nanos: 0 };
        this.created.set(`${kind.key}|${key}`, created);
      }
      after.set(key, {
        object,
        json,
        resourceVersion: prev?.json === json ? prev.resourceVersion : String(++this.resourceVersion),
        createTime: object.createTime === undefined ? created : object.createTime,
      });
    }
    this.byKind.set(kind.key, after);
  }

  objects(kind: KindDescriptor): StoredObject[] {
    return [...(this.byKind.get(kind.key)?.values() ?? [])];
  }

  clear(): void {
    this.byKind.clear();
  }
}
