import { z } from 'zod';
import { FileSourceConfig } from './sources/file.js';

/**
 * Every source type's configuration schema, discriminated by `type`. A new source type adds its
 * schema file under sources/ and one entry here.
 */
export const SourceConfig = z.discriminatedUnion('type', [FileSourceConfig]);

export type SourceConfig = z.infer<typeof SourceConfig>;
