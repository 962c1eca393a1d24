import { MeshmuxError } from '../../core/errors.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import type { Logger } from '../../core/logger.js';
import type { McpResourceReader } from '../mcp-resource-reader.js';
import type { NodeIdentity } from '../streaming/node-identity.js';
import type { SubscriptionState } from '../streaming/subscription-state.js';
import { readTopLevelFields, salvageString } from '../../wire/wire-fields.js';

/** Any type URL suffix of the MCP envelope around every object. */

/** `google.rpc.Code.INVALID_ARGUMENT`, the code of every NACK an ADS client sends. */
export const INVALID_ARGUMENT = 3;

/**
 * The longest type URL, nonce or version a response may carry: 16 Ki characters. Real ones are
 * a type name, a counter, a hash or a timestamp; the nonce and version come back in every ACK and
 * the version is kept, so a response whose string is longer is refused as bad input.
 */
export const MAX_RESPONSE_STRING_CHARS = 16 * 1024;

/**
 * The error refusing a response one of whose `strings` (its type URL, nonce and version, by their
 * field names) is longer than {@link MAX_RESPONSE_STRING_CHARS}, naming the first such and its
 * length; undefined when none is. Nothing of such a response is applied: what the source serves
 * is kept.
 */
export function overlongString(
  ctx: AdsClientContext,
  strings: Readonly<Record<string, string>>,
): MeshmuxError | undefined {
  for (const [field, value] of Object.entries(strings)) {
    if (value.length <= MAX_RESPONSE_STRING_CHARS) continue;
    return new MeshmuxError(
      'LIMIT',
      `a response's ${field} of ${value.length} characters is longer than the limit of ` +
        `${MAX_RESPONSE_STRING_CHARS}; it was refused, and what the source serves is kept`,
      { file: ctx.describe },
    );
  }
  return undefined;
}

/** What both ADS clients (state of the world and delta) work with; owned by the source. */
export interface AdsClientContext {
  readonly state: SubscriptionState;
  readonly reader: McpResourceReader;
  readonly node: NodeIdentity;
  readonly log: Logger;
  /** `xds://host:port`, for messages. */
  readonly describe: string;
  /** The upstream answered: resets the reconnect backoff. */
  readonly onAnswer: () => void;
}

/**
 * Reports a response that does not decode at all (it changes nothing) and returns the error, with
 * what a NACK of it needs: its type URL and nonce (fields 4 and 5 of both response messages), when
 * they can be salvaged and the type is subscribed (`nack` undefined otherwise).
 */
export function reportUndecodable(
  ctx: AdsClientContext,
  messageName: string,
  message: Uint8Array,
  err: unknown,
): { readonly error: MeshmuxError; readonly nack: { typeUrl: string; nonce: string } | undefined } {
  const fields = readTopLevelFields(message).fields;
  const typeUrl = salvageString(fields, 4);
  const nonce = salvageString(fields, 5);
  const error = new MeshmuxError(
    'DECODE',
    `an undecodable ${messageName} (${message.byteLength} bytes${typeUrl === undefined ? '' : ` for ${truncateForLog(typeUrl)}`}) was ignored: ${truncateForLog((err as Error).message, 1024)}`,
    { file: ctx.describe },
    { cause: err },
  );
  ctx.log.warn({ err: error.message }, 'undecodable response');
  ctx.state.report(error);
  if (typeUrl === undefined || nonce === undefined || !ctx.state.has(typeUrl))
    return { error, nack: undefined };
  return { error, nack: { typeUrl, nonce } };
}

/**
 * Logs a response for a type URL not subscribed and returns the NACK's text. The upstream picks
 * the type URL and the pace: it is cut in the log and in the text (the NACK's own type URL field
 * names it whole), and only a stream's first such response is logged at warn (`again`: one was
 * already), the rest at debug.
 */
export function refuseUnsubscribed(
  ctx: AdsClientContext,
  typeUrl: string,
  again: boolean,
  version?: string,
): string {
  const named = truncateForLog(typeUrl);
  const detail = `meshmux rejected a response for ${named || '(no type URL)'}, which it did not subscribe`;
  const fields =
    version === undefined ? { typeUrl: named } : { typeUrl: named, version: truncateForLog(version) };
  ctx.log[again ? 'debug' : 'warn'](fields, detail);
  return detail;
}
