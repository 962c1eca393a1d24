import { z } from 'zod';
import { ByteSize, COMMON_SOURCE_FIELDS, Duration, globSchema } from './common.js';

/**
 * Transports the git source accepts: `https://`, `http://`, `ssh://`, `git://`, `file://` and the
 * scp-like `user@host:path`. Anything else (`ext::`, `fd::`, bare local paths) is refused here,
 * and git itself is told to allow only these protocols.
 */
const GIT_URL = /^((https?|ssh|git|file):\/\/\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s/][^\s]*)$/;

/** A branch, a tag, a full ref (`refs/heads/main`) or a full commit id. */
const GIT_REF = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*@\{)[A-Za-z0-9._@+/-]+(?<![/.])$/;

/**
 * A repository path glob (the dialect of `core/glob.ts` with `/` separating folders). An unclosed
 * bracket or brace, or a range such as `[z-a]`, would otherwise match nothing, and the source would
 * serve no file.
 */
const RepoPathGlob = globSchema('path').min(1);

const WebhookConfig = z.strictObject({
  /** File holding the webhook secret (GitHub/Gitea "Secret", GitLab "Secret token"). */
  secretFile: z.string().min(1).optional(),
  /** Environment variable holding the webhook secret. */
  secretEnv: z.string().min(1).optional(),
  /** Accept unsigned webhooks (no secret): anyone who can reach the port can make the source fetch. */
  insecure: z.boolean().optional(),
});

/** `type: git`: Istio YAML at a branch, tag or commit of a git repository, polled and webhook-triggered. */
export const GitSourceConfig = z
  .strictObject({
    ...COMMON_SOURCE_FIELDS,
    type: z.literal('git'),
    url: z.string().regex(GIT_URL, 'a git URL: https://, http://, ssh://, git://, file:// or user@host:path'),
    /** Branch, tag, full ref or full commit id to serve; default the remote's default branch (HEAD). */
    ref: z.string().regex(GIT_REF, 'a branch, tag or commit id').default('HEAD'),
    /** Globs of repository paths to read; `**` crosses folders, dot-folders are skipped. */
    paths: z.array(RepoPathGlob).min(1).default(['**/*.{yaml,yml}']),
    /** How often to fetch; a webhook fetches at once. */
    interval: Duration.default(60_000),
    /** Any invalid document holds the whole commit back (the last good commit stays served). */
    strict: z.boolean().default(false),
    /** Longest a fetch may take before it is abandoned and reported. */
    timeout: Duration.default(120_000),
    /** Private key for ssh URLs. */
    sshKey: z.string().min(1).optional(),
    /** known_hosts for ssh URLs; host keys are always checked. */
    knownHosts: z.string().min(1).optional(),
    /** File holding an HTTPS access token, re-read on every fetch so rotation needs no restart. */
    tokenFile: z.string().min(1).optional(),
    /** Environment variable holding an HTTPS access token. */
    tokenEnv: z.string().min(1).optional(),
    /** User name sent with the token (GitHub: any; GitLab OAuth: `oauth2`). */
    tokenUser: z.string().min(1).default('x-access-token'),
    /** `POST /hooks/git/<name>` fetches at once; with a secret, only signed requests are accepted. */
    webhook: WebhookConfig.optional(),
    /** Folder of the shared bare repositories (one per URL); default a folder in the OS temp dir. */
    cacheDir: z.string().min(1).optional(),
    /** Largest blob read (bytes, or `32Mi`); a larger file is an error and keeps what it held. Default 32Mi. */
    maxFileSize: ByteSize.optional(),
  })
  .refine((c) => c.tokenFile === undefined || c.tokenEnv === undefined, {
    message: 'tokenFile and tokenEnv are alternatives; set one',
    path: ['tokenEnv'],
  })
  .refine((c) => c.webhook?.secretFile === undefined || c.webhook.secretEnv === undefined, {
    message: 'secretFile and secretEnv are alternatives; set one',
    path: ['webhook', 'secretEnv'],
  });

export type GitSourceConfig = z.infer<typeof GitSourceConfig>;
