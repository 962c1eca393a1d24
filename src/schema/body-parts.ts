/**
 * A large body decoded in parts, so that reading it never holds all of it as objects at once: a
 * body's decoded form takes 4 to 13 times its encoded size, and a VirtualService of thousands of
 * routes is megabytes of short-lived objects when decoded whole. Almost all of a large body is in
 * its top-level lists of messages (routes, servers, rules); those are left out of the decoded
 * message and decoded one element at a time when asked for.
 */
import protobuf from 'protobufjs';
import { StrictReader } from '../wire/strict-reader.js';
import { WireCursor } from '../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../wire/wire-types.js';
import type { MessageList } from './proto-json.js';

/** Bodies smaller than this are decoded whole: their objects are a few hundred kilobytes at most. */
export const LARGE_BODY_BYTES = 64 * 1024;

/** A body as a message without its top-level lists of messages, and those lists apart. */
export interface BodyParts {
  /**
   * The body decoded without the fields in `lists` (absent from it, not empty): everything else
   * is as a whole decode gives it.
   */
  readonly message: protobuf.Message;
  /** Each top-level list of messages the body holds, its elements decoded afresh on every `at`. */
  readonly lists: ReadonlyMap<protobuf.Field, MessageList>;
}

/** Offsets into the body of one list's elements, decoded from the body itself when asked for. */
class ElementList implements MessageList {
  private readonly reader: StrictReader;
  private readonly bounds: number[] = [];

  constructor(
    private readonly type: protobuf.Type,
    body: Uint8Array,
  ) {
    this.reader = new StrictReader(body);
  }

  get length(): number {
    return this.bounds.length / 2;
  }

  add(start: number, end: number): void {
    this.bounds.push(start, end);
  }

  at(index: number): protobuf.Message {
    const start = this.bounds[2 * index];
    const end = this.bounds[2 * index + 1];
    if (start === undefined || end === undefined)
      throw new RangeError(`no element ${index} in a list of ${this.length}`);
    this.reader.pos = start;
    return this.type.decode(this.reader, end - start);
  }
}

/**
 * `body`, a message of `type`, decoded in parts when it is at least `minBytes` long and holds a
 * top-level list of messages; undefined otherwise, or when its top level does not read plainly (a
 * group, a list element that is not length-delimited, bytes that do not parse), and then a whole
 * decode decides. So does a body any part of which does not decode (or holds text that is not
 * UTF-8): every element is decoded once here, and a whole decode then names the fault as it
 * always does, with its offset in the body. Elements decoded here cannot fail when asked for again.
 */
export function decodeBodyParts(
  type: protobuf.Type,
  body: Uint8Array,
  minBytes = LARGE_BODY_BYTES,
): BodyParts | undefined {
  if (body.length < minBytes) return undefined;
  const lists = new Map<protobuf.Field, ElementList>();
  // Everything else, as runs of the body to join into the message's own bytes.
  const kept: number[] = [];
  let keptBytes = 0;
  const cursor = new WireCursor(body);
  try {
    while (cursor.pos < body.length) {
      const tagStart = cursor.pos;
      const tag = cursor.uint32(body.length);
      const wireType = tag & 7;
      const field = type.fieldsById[tag >>> 3];
      const elementType = field?.repeated === true && !field.map ? field.resolvedType : null;
      if (field !== undefined && elementType instanceof protobuf.Type) {
        if (wireType !== WIRE_LENGTH_DELIMITED) return undefined;
        cursor.lengthDelimited(body.length);
        let list = lists.get(field);
        if (list === undefined) lists.set(field, (list = new ElementList(elementType, body)));
        list.add(cursor.start, cursor.end);
        continue;
      }
      if (tag >>> 3 === 0 || wireType > 5 || wireType === 3 || wireType === 4) return undefined;
      cursor.skip(wireType, body.length, tag >>> 3);
      if (kept.length > 0 && kept[kept.length - 1] === tagStart) kept[kept.length - 1] = cursor.pos;
      else kept.push(tagStart, cursor.pos);
      keptBytes += cursor.pos - tagStart;
    }
  } catch {
    return undefined;
  }
  if (lists.size === 0) return undefined;
  const own = new Uint8Array(keptBytes);
  for (let i = 0, at = 0; i < kept.length; i += 2) {
    const piece = body.subarray(kept[i], kept[i + 1]);
    own.set(piece, at);
    at += piece.length;
  }
  try {
    const message = type.decode(new StrictReader(own));
    for (const list of lists.values()) for (let i = 0; i < list.length; i++) list.at(i);
    return { message, lists };
  } catch {
    return undefined;
  }
}
