import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import type { Timestamp } from '../../core/resource.js';
import type { JsonValue } from '../../schema/json-value.js';
import { readJsonDocument } from '../../schema/yaml-reader.js';
import { readYamlBytes } from '../runtime/yaml-file-reader.js';
import type { YamlFileRead } from '../runtime/yaml-file-set.js';
import {
  configDocument,
  inspectObject,
  MAX_OBJECT_DEPTH,
  type KubernetesObject,
} from './kubernetes-object.js';

/** The largest object accepted, bytes of JSON (the API server's own limit is about 1.5 MiB). */
export const MAX_OBJECT_BYTES = 3 * 1024 * 1024;

/**
 * The largest object read on the calling thread, bytes of JSON; a larger one is read on the YAML
 * reader's worker. Once warm, reading costs up to about 0.6 µs per byte (an EnvoyFilter `Struct`;
 * 7 ms for one of 22 KB), so one object holds the thread for 20 ms at most; a typical object is a
 * few KiB and takes tens of µs, against about 0.5 ms through the worker.
 */
export const MAX_OBJECT_BYTES_READ_HERE = 32 * 1024;

/** How to read one object. */
export interface KubernetesObjectReading {
  /** The name its problems carry (the API server, the kind and the object's key). */
  readonly file: string;
  readonly defaultNamespace: string;
  /** The creation time of an object without `creationTimestamp`. */
  readonly createTimeFor: (kind: string, namespace: string, name: string) => Timestamp;
}

/**
 * What an object from the API server yields: what the file reader yields for the JSON text of its
 * {@link configDocument} (same resources, byte for byte, same errors and warnings), with bounds
 * of its own. An object nested deeper than {@link MAX_OBJECT_DEPTH} is refused before anything
 * recursive touches it, one whose text is over {@link MAX_OBJECT_BYTES} as a file that size is,
 * and any other failure to convert it becomes its error. Never throws, never rejects.
 *
 * An object of up to {@link MAX_OBJECT_BYTES_READ_HERE} is read at once, from the object itself,
 * no text parsed (the result is no promise); a larger one as text, on the YAML reader's worker.
 */
export function readKubernetesObject(
  object: KubernetesObject,
  reading: KubernetesObjectReading,
): YamlFileRead | Promise<YamlFileRead> {
  const { file } = reading;
  const inspection = inspectObject(object, MAX_OBJECT_DEPTH);
  if (inspection.tooDeepAt !== undefined) {
    return refused(
      new MeshmuxError('LIMIT', `nested more than ${MAX_OBJECT_DEPTH} levels deep; not read`, {
        file,
        field: inspection.tooDeepAt,
      }),
    );
  }
  try {
    const document = configDocument(object);
    // Written natively in a few µs: its size is what the bounds apply to.
    const text = JSON.stringify(document);
    const size = Buffer.byteLength(text);
    if (size > MAX_OBJECT_BYTES_READ_HERE) {
      return readYamlBytes({
        ...reading,
        size,
        // Not even encoded when over the cap: it is refused by its size.
        bytes: size > MAX_OBJECT_BYTES ? undefined : new TextEncoder().encode(text),
        maxFileBytes: MAX_OBJECT_BYTES,
      }).catch((err: unknown) => refused(toMeshmuxError(err, 'INTERNAL', { file })));
    }
    // An object holding a number its text writes otherwise (-0 as 0, an overflowed 1e400 as
    // null) is read from that text, parsed as JSON, so that it reads as the text does.
    const value = inspection.numbersAsWritten ? document : (JSON.parse(text) as JsonValue);
    return readJsonDocument(value, reading);
  } catch (err) {
    return refused(toMeshmuxError(err, 'INTERNAL', { file }));
  }
}

function refused(error: MeshmuxError): YamlFileRead {
  return { resources: [], errors: [error], warnings: [] };
}
