import { WireCursor } from '../../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED, WIRE_VARINT } from '../../wire/wire-types.js';

/**
 * An `istio.mcp.v1alpha1.Resources` read at its top level only: its strings, and where each
 * encoded `Resource` lies, for the reader to take one at a time (a bad object stays alone, and an
 * object sent again as it was is recognised by its bytes before anything of it is decoded).
 */
export interface ResourcesMessage {
  readonly systemVersionInfo: string;
  readonly collection: string;
  readonly removedResources: readonly string[];
  readonly nonce: string;
  readonly incremental: boolean;
  /** Per entry of `resources`, where its bytes start and end in the message: `2i` and `2i + 1`. */
  readonly resources: readonly number[];
}

const SYSTEM_VERSION_INFO = 1;
const COLLECTION = 2;
const RESOURCES = 3;
const REMOVED_RESOURCES = 4;
const NONCE = 5;
const INCREMENTAL = 6;

/**
 * Reads `bytes` as a `Resources` message (the last of each singular field, as proto3 reads them;
 * fields it does not define skipped). Throws when the top level is not well formed (an overrun,
 * a wire type its field cannot have); nothing inside an entry is looked at.
 */
export function readResourcesMessage(bytes: Uint8Array): ResourcesMessage {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const cursor = new WireCursor(bytes);
  const limit = bytes.byteLength;
  let systemVersionInfo = '';
  let collection = '';
  let nonce = '';
  let incremental = false;
  const removedResources: string[] = [];
  const resources: number[] = [];
  while (cursor.pos < limit) {
    const tag = cursor.uint32(limit);
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 0) throw new Error(`invalid field number 0 at byte ${cursor.pos}`);
    if (field === INCREMENTAL) {
      if (wireType !== WIRE_VARINT)
        throw new Error(`Resources field 6 has wire type ${wireType}, expected 0`);
      const at = cursor.pos;
      cursor.skip(WIRE_VARINT, limit, field);
      // Any bit set in the varint is true, as a 64-bit read of a bool takes it.
      let set = false;
      for (let i = at; i < cursor.pos; i++) if (((bytes[i] as number) & 0x7f) !== 0) set = true;
      incremental = set;
      continue;
    }
    if (field > INCREMENTAL) {
      cursor.skip(wireType, limit, field);
      continue;
    }
    if (wireType !== WIRE_LENGTH_DELIMITED) {
      throw new Error(
        `Resources field ${field} has wire type ${wireType}, expected ${WIRE_LENGTH_DELIMITED}`,
      );
    }
    cursor.lengthDelimited(limit);
    const { start, end } = cursor;
    if (field === RESOURCES) resources.push(start, end);
    else if (field === SYSTEM_VERSION_INFO) systemVersionInfo = text.toString('utf8', start, end);
    else if (field === COLLECTION) collection = text.toString('utf8', start, end);
    else if (field === REMOVED_RESOURCES) removedResources.push(text.toString('utf8', start, end));
    else if (field === NONCE) nonce = text.toString('utf8', start, end);
  }
  return { systemVersionInfo, collection, removedResources, nonce, incremental, resources };
}
