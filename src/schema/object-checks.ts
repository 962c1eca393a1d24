/**
 * The checks an object from an upstream (an encoded body with its envelope's metadata) must pass
 * to be served: the same ones a YAML document passes in `yaml-reader.ts`, applied to the same
 * data, so an object is refused or accepted alike whichever source it came from.
 */
import type protobuf from 'protobufjs';
import { MeshmuxError } from '../core/errors.js';
import { checkTypedMeta } from './object-meta.js';
import { checkDecodedAsJson, jsonRoundTripCanFail, type MessageList } from './proto-json.js';
import { PLAIN_BODY } from './unknown-fields.js';

/** The metadata an upstream envelope carries, as it was sent. */
export interface EnvelopeMeta {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

/** What the checks found: `errors` refuse the object, `warnings` are tolerated oddities. */
export interface ObjectCheckResult {
  readonly errors: MeshmuxError[];
  readonly warnings: MeshmuxError[];
}

/**
 * Checks an upstream object as a file object is checked: its metadata with the Kubernetes rules
 * of `checkTypedMeta` (DNS-1123 name and namespace, label and annotation keys and values), and its
 * body, through its proto3 JSON form, with the schema checks of `fromProtoJson` (ranges, durations,
 * alternatives set together, `null` list elements ...), unless no message of its type decoded
 * from bytes can fail them (`jsonRoundTripCanFail`). `message` is the decoded body, without the
 * top-level lists held apart in `lists` (see `decodeBodyParts`), or `PLAIN_BODY` for a body
 * `isPlainBody` accepted, which those checks cannot refuse and need not be decoded for. Each error
 * carries the field path (`metadata.name`, `spec.http[0].timeout`) and no file.
 */
export function checkUpstreamObject(
  meta: EnvelopeMeta,
  bodyType: protobuf.Type,
  message: protobuf.Message | typeof PLAIN_BODY,
  lists?: ReadonlyMap<protobuf.Field, MessageList>,
): ObjectCheckResult {
  const errors: MeshmuxError[] = [];
  const warnings: MeshmuxError[] = [];
  checkTypedMeta(meta, errors, warnings);
  // Most kinds' messages cannot fail them at all (ServiceEntry, WorkloadEntry ...): not walked.
  if (message === PLAIN_BODY || !jsonRoundTripCanFail(bodyType)) return { errors, warnings };
  try {
    // Checked on the decoded message as its JSON form would be; nothing is printed or encoded.
    const found: MeshmuxError[] = [];
    checkDecodedAsJson(bodyType, message, { path: 'spec', errors: found }, lists);
    if (found[0] !== undefined) throw found[0];
  } catch (err) {
    // Values no JSON form exists for (a Duration beyond 10000 years) throw, as toProtoJson would.
    const error = err instanceof MeshmuxError ? err : undefined;
    errors.push(
      new MeshmuxError(
        'SCHEMA',
        error?.message ?? (err as Error).message,
        { field: error?.location.field ?? 'spec' },
        { cause: err },
      ),
    );
  }
  return { errors, warnings };
}
