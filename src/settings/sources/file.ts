import { z } from 'zod';
import { ByteSize, COMMON_SOURCE_FIELDS, Duration } from './common.js';

/** `type: file`: a YAML file or folder, read recursively and watched. */
export const FileSourceConfig = z.strictObject({
  ...COMMON_SOURCE_FIELDS,
  type: z.literal('file'),
  path: z.string().min(1),
  /** Full rescan period under file-system events. */
  rescanInterval: Duration.optional(),
  /** How long a file that held objects must stay empty or absent before they are deleted. */
  vanishGrace: Duration.optional(),
  /** Largest file read (bytes, or `32Mi`); a larger file is an error and keeps what it held. Default 32Mi. */
  maxFileSize: ByteSize.optional(),
});

export type FileSourceConfig = z.infer<typeof FileSourceConfig>;
