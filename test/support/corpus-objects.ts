/**
 * The documents of the corpus (test/fixtures/corpus) as the Kubernetes API server would serve
 * them: each map document read as Istio reads YAML, with the bookkeeping the server adds.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Composer, Parser } from 'yaml';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { isPlainObject } from '../../src/schema/json-value.js';
import { yamlToJson } from '../../src/schema/yaml-to-json.js';
import {
  LAST_APPLIED_ANNOTATION,
  type KubernetesObject,
} from '../../src/upstream/kubernetes/kubernetes-object.js';

const CORPUS = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'corpus');

/** One document of the corpus as an API object. */
export interface CorpusObject {
  /** The corpus file it comes from, e.g. `istio/samples__bookinfo__...yaml`. */
  readonly file: string;
  readonly object: KubernetesObject;
}

/**
 * Every map document of the corpus files (`istio/`, then `invalid/`) that parses, as an API
 * object; documents with syntax errors and documents that are no map are left out.
 */
export function corpusObjects(): CorpusObject[] {
  const objects: CorpusObject[] = [];
  for (const folder of ['istio', 'invalid']) {
    for (const name of readdirSync(path.join(CORPUS, folder)).sort()) {
      if (!name.endsWith('.yaml')) continue;
      const text = readFileSync(path.join(CORPUS, folder, name), 'utf8');
      for (const document of documentsOf(text)) {
        objects.push({ file: `${folder}/${name}`, object: served(document) });
      }
    }
  }
  return objects;
}

/** Each map document of a YAML text as JSON data, as Istio reads YAML (go-yaml's scalars). */
function documentsOf(text: string): Record<string, unknown>[] {
  const composer = new Composer({ schema: 'failsafe', uniqueKeys: false });
  const values: Record<string, unknown>[] = [];
  for (const doc of composer.compose(new Parser().parse(text))) {
    if (doc.errors.length > 0 || doc.contents === null) continue;
    const converted = yamlToJson(doc.contents, doc);
    if (converted.errors.length === 0 && isPlainObject(converted.value)) values.push(converted.value);
  }
  return values;
}

/** A document as the API server serves it, with the bookkeeping it adds to every object. */
function served(document: Record<string, unknown>): KubernetesObject {
  const metadata = document['metadata'];
  if (!isPlainObject(metadata)) return document;
  const annotations = metadata['annotations'];
  return {
    ...document,
    metadata: {
      ...metadata,
      uid: '6d3c1a2e-5b1f-4c1e-9a43-1d2b3c4d5e6f',
      resourceVersion: '4711',
      generation: 1,
      managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': {} } }],
      ...(annotations === undefined || isPlainObject(annotations)
        ? { annotations: { ...annotations, [LAST_APPLIED_ANNOTATION]: JSON.stringify(document) } }
        : {}),
    },
  };
}
