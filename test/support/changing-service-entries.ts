/**
 * The state of a source that is never done: `count` ServiceEntries, encoded once, in which every
 * object changes from one state to the next (its `metadata.version`, an annotation and its port's
 * name carry the state's number). Each next state writes its number over the last one in place,
 * so a peer sending it costs its process a copy per state, not an encoding of every object.
 */
import protobuf from 'protobufjs';
import { encodeMcpResource, kindNamed } from './fake-objects.js';

/** Where each state's number is written: as many digits as this mark has characters. */
const MARK = '@@@@@@@@';

/** Writes one encoded `istio.mcp.v1alpha1.Resource` as an entry of the message that carries it. */
export type EntryWriter = (writer: protobuf.Writer, resource: Uint8Array) => void;

/** `count` ServiceEntries `busy/se-000000`…, every one of them changed in each next state. */
export class ChangingServiceEntries {
  /** The entries, as the fields of a message; the state last {@link stamp}ed. */
  readonly bytes: Buffer;
  private readonly marks: number[] = [];

  constructor(count: number, entry: EntryWriter) {
    const kind = kindNamed('ServiceEntry');
    const w = protobuf.Writer.create();
    for (let i = 0; i < count; i++) {
      const name = `se-${String(i).padStart(6, '0')}`;
      const resource = encodeMcpResource(
        kind,
        {
          namespace: 'busy',
          name,
          annotations: { 'example.com/state': MARK },
          spec: {
            hosts: [`${name}.busy.example.com`],
            location: 'MESH_EXTERNAL',
            resolution: 'DNS',
            ports: [{ number: 443, name: `https-${MARK}`, protocol: 'TLS' }],
          },
        },
        { version: MARK, createTime: { seconds: 1_700_000_000, nanos: 0 } },
      );
      entry(w, resource);
    }
    this.bytes = Buffer.from(w.finish());
    for (let at = this.bytes.indexOf(MARK); at >= 0; at = this.bytes.indexOf(MARK, at + MARK.length))
      this.marks.push(at);
  }

  /** Makes {@link bytes} state number `seq`. */
  stamp(seq: number): void {
    const digits = String(seq % 10 ** MARK.length).padStart(MARK.length, '0');
    for (const at of this.marks) this.bytes.write(digits, at, 'latin1');
  }
}
