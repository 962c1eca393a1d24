/**
 * `POST /hooks/git/<source>`: push notifications from GitHub, GitLab and Gitea (or a bare POST
 * from a script) make a git source fetch at once instead of at its next poll. The payload is
 * only a hint: the source fetches its ref and serves what the remote holds, so a forged or
 * replayed request can cost a fetch, never change what is served.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { PushAnswer, PushNotification } from '../upstream-source.js';
import { isCommitId } from './git-url.js';

/** Events that announce new commits; any other event of a known forge is acknowledged and ignored. */
const PUSH_EVENTS: ReadonlyArray<readonly [header: string, events: readonly string[]]> = [
  ['x-github-event', ['push']],
  ['x-gitlab-event', ['Push Hook', 'Tag Push Hook']],
  ['x-gitea-event', ['push']],
  ['x-gogs-event', ['push']],
];

/** Headers that carry a forge's delivery id (a redelivery repeats it). */
const DELIVERY_HEADERS = ['x-github-delivery', 'x-gitlab-event-uuid', 'x-gitea-delivery', 'x-gogs-delivery'];

/** What a webhook needs of a git source. */
export interface WebhookTarget {
  /** The secret requests must be signed with, read now; undefined when none is configured. */
  webhookSecret(): Promise<string | undefined>;
  /** Whether a secret is configured (a file or a variable), known without reading it. */
  readonly hasWebhookSecret: boolean;
  /** Without a secret: whether unsigned requests are accepted all the same. */
  readonly insecureWebhook: boolean;
  /** Recent delivery ids: a repeated one is acknowledged without a fetch. */
  readonly deliveries: { repeated(id: string): boolean };
  /** The configured ref: a push to another one is ignored. */
  readonly ref: string;
  /** Whether it runs (something subscribes); a stopped source cannot fetch. */
  readonly running: boolean;
  /** Starts a fetch; the answer does not wait for it. */
  fetchNow(reason: string): Promise<void>;
}

/**
 * The answer to every webhook request for `source` when it takes none (no secret configured, and
 * unsigned requests not accepted), decided before a body is read; undefined when it takes them.
 */
export function gitWebhookRefusal(source: WebhookTarget): PushAnswer | undefined {
  if (source.hasWebhookSecret || source.insecureWebhook) return undefined;
  return {
    status: 401,
    body: {
      error:
        'this source has no webhook secret: set webhook.secretFile (or secretEnv), or webhook.insecure: true to accept unsigned requests',
    },
  };
}

/** Handles one webhook request for `source`. Never throws. */
export async function handleGitWebhook(
  source: WebhookTarget,
  request: PushNotification,
): Promise<PushAnswer> {
  const refusal = gitWebhookRefusal(source);
  if (refusal !== undefined) return refusal;
  let secret: string | undefined;
  try {
    secret = await source.webhookSecret();
  } catch {
    return { status: 503, body: { error: 'the webhook secret of this source cannot be read' } };
  }
  // A secret said to be configured but read as none is refused all the same.
  if (secret === undefined && !source.insecureWebhook) {
    return { status: 503, body: { error: 'the webhook secret of this source cannot be read' } };
  }
  if (secret !== undefined && !verifySignature(secret, request)) {
    return { status: 401, body: { error: 'missing or invalid webhook signature' } };
  }
  const delivery = DELIVERY_HEADERS.map((h) => headerValue(request.headers, h)).find((v) => v !== undefined);
  if (delivery !== undefined && source.deliveries.repeated(delivery)) {
    return {
      status: 200,
      body: { fetch: 'skipped', duplicate: true, reason: `delivery ${delivery} was handled already` },
    };
  }

  for (const [header, events] of PUSH_EVENTS) {
    const event = headerValue(request.headers, header);
    if (event !== undefined && !events.includes(event)) {
      return { status: 200, body: { fetch: 'skipped', reason: `event "${event}" carries no commits` } };
    }
  }

  let ref: string | undefined;
  try {
    ref = pushedRef(request);
  } catch {
    return { status: 400, body: { error: 'the body is neither JSON nor a form with a JSON payload' } };
  }
  if (isCommitId(source.ref)) {
    return { status: 200, body: { fetch: 'skipped', reason: `pinned to commit ${source.ref}` } };
  }
  if (ref !== undefined && !refMatches(source.ref, ref)) {
    return { status: 200, body: { fetch: 'skipped', reason: `push to ${ref}, not ${source.ref}` } };
  }
  if (!source.running) return { status: 503, body: { error: 'the source is not running' } };
  // Answer at once: forges time webhooks out after a few seconds, and the fetch reports itself.
  void source.fetchNow('webhook');
  return { status: 202, body: { fetch: 'triggered' } };
}

/**
 * Whether the request is signed with `secret`: GitHub's and Gitea's HMAC-SHA256 of the body
 * (`X-Hub-Signature-256: sha256=<hex>`, `X-Gitea-Signature: <hex>`, `X-Gogs-Signature: <hex>`)
 * or GitLab's shared token (`X-Gitlab-Token`). Compared in constant time.
 */
export function verifySignature(secret: string, request: PushNotification): boolean {
  const mac = createHmac('sha256', secret).update(request.body).digest('hex');
  const github = headerValue(request.headers, 'x-hub-signature-256');
  if (github !== undefined && safeEqual(github.toLowerCase(), `sha256=${mac}`)) return true;
  for (const header of ['x-gitea-signature', 'x-gogs-signature']) {
    const value = headerValue(request.headers, header);
    if (value !== undefined && safeEqual(value.toLowerCase(), mac)) return true;
  }
  const gitlab = headerValue(request.headers, 'x-gitlab-token');
  return gitlab !== undefined && safeEqual(gitlab, secret);
}

/** Equal strings in time independent of where they differ (hashed first, so lengths leak nothing). */
function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The `ref` a push payload names (all three forges use `ref`); undefined for an empty or ref-less body. */
function pushedRef(request: PushNotification): string | undefined {
  const text = request.body.toString('utf8').trim();
  if (text === '') return undefined;
  const type = headerValue(request.headers, 'content-type') ?? '';
  // GitHub can be configured to send `application/x-www-form-urlencoded` with the JSON in `payload`.
  const json = type.startsWith('application/x-www-form-urlencoded')
    ? (new URLSearchParams(text).get('payload') ?? '')
    : text;
  const payload: unknown = JSON.parse(json);
  if (payload === null || typeof payload !== 'object') return undefined;
  const ref = (payload as Record<string, unknown>)['ref'];
  return typeof ref === 'string' && ref !== '' ? ref : undefined;
}

/** Whether a pushed ref (`refs/heads/main`, `refs/tags/v1`) is the configured one (`main`, `v1`, or in full). */
export function refMatches(configured: string, pushed: string): boolean {
  // HEAD follows the remote's default branch, which a push payload does not name reliably.
  if (configured === pushed || configured === 'HEAD') return true;
  if (configured.startsWith('refs/')) return false;
  return pushed === `refs/heads/${configured}` || pushed === `refs/tags/${configured}`;
}
