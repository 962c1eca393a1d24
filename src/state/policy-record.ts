import { open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import { LatestOnlyWriter } from '../core/latest-only-writer.js';
import type { Logger } from '../core/logger.js';
import { syncFolder } from './file-record-store.js';

/** The file in the state folder that keeps the policies in force. */
export const POLICY_RECORD_FILE = 'policies.json';

/** An istiod as a policy sees it: what its match may test. */
export interface RecordedClient {
  readonly nodeId: string;
  readonly peer: string;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly sans: readonly string[];
  /** When it was last seen connected (Unix ms); absent in a record that did not say (then: when it was saved). */
  readonly seenAtMs?: number;
}

/**
 * The policies a process served under and the istiods connected to it, so that a restart whose
 * configuration changed them judges the change for those istiods as a reload would.
 */
export interface PolicyRecord {
  readonly savedAt: string;
  /** The policies in force, as the configuration gave them (checked again when read back). */
  readonly policies: readonly unknown[];
  readonly clients: readonly RecordedClient[];
}

/** Reads the folder's policy record; absent when there is none, a problem when it cannot be believed. */
export async function readPolicyRecord(
  dir: string,
): Promise<{ readonly record?: PolicyRecord; readonly problem?: MeshmuxError }> {
  const file = path.join(dir, POLICY_RECORD_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { problem: toMeshmuxError(err, 'STATE', { file }) };
  }
  try {
    return { record: parsePolicyRecord(text) };
  } catch (err) {
    return { problem: new MeshmuxError('STATE', `cannot be read: ${(err as Error).message}`, { file }) };
  }
}

/** A policy record from its JSON text; throws saying what is wrong with it. */
export function parsePolicyRecord(text: string): PolicyRecord {
  const o = JSON.parse(text) as Partial<PolicyRecord> | null;
  if (
    o === null ||
    typeof o !== 'object' ||
    typeof o.savedAt !== 'string' ||
    !Array.isArray(o.policies) ||
    !Array.isArray(o.clients) ||
    !o.clients.every(isRecordedClient)
  ) {
    throw new Error('not a policy record (savedAt, policies, clients)');
  }
  return { savedAt: o.savedAt, policies: o.policies, clients: o.clients };
}

function isRecordedClient(c: unknown): c is RecordedClient {
  if (c === null || typeof c !== 'object') return false;
  const o = c as Record<string, unknown>;
  return (
    typeof o['nodeId'] === 'string' &&
    typeof o['peer'] === 'string' &&
    o['metadata'] !== null &&
    typeof o['metadata'] === 'object' &&
    Array.isArray(o['sans']) &&
    (o['sans'] as unknown[]).every((s) => typeof s === 'string')
  );
}

/**
 * Writes the policy record of a state folder: whole, through a temporary file, fsync, rename and
 * an fsync of the folder, one write at a time, the latest record only. A failed write is logged
 * once per distinct error and left for the next.
 */
export class PolicyRecordFile {
  private readonly writer = new LatestOnlyWriter((record: PolicyRecord) => this.writeNow(record));
  private lastError = '';

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {}

  write(record: PolicyRecord): void {
    this.writer.write(record);
  }

  /** Resolves once every record handed in has been written (or failed). */
  flushed(): Promise<void> {
    return this.writer.flushed();
  }

  private async writeNow(record: PolicyRecord): Promise<void> {
    const file = path.join(this.dir, POLICY_RECORD_FILE);
    const temporary = `${file}.${process.pid}.tmp`;
    try {
      const handle = await open(temporary, 'w', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(record)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
      await syncFolder(this.dir);
      this.lastError = '';
    } catch (err) {
      await unlink(temporary).catch(() => undefined);
      const error = toMeshmuxError(err, 'STATE', { file });
      if (error.message !== this.lastError) {
        this.lastError = error.message;
        this.log.error({ err: error.describe() }, 'cannot write the policies in force');
      }
    }
  }
}
