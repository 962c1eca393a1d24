import assert from 'node:assert/strict';
import { mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { FileSource } from '../../src/upstream/file/file-source.js';
import { listYamlFiles } from '../../src/upstream/runtime/yaml-file-reader.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

/**
 * Lays out `files` as the kubelet projects a ConfigMap: the files in a `..<timestamp>` folder,
 * `..data` pointing at it, and each visible name a symlink through `..data`. Called again, it
 * makes the next timestamp folder, swaps `..data` atomically and removes the previous folder.
 */
async function projectConfigMap(
  dir: string,
  generation: number,
  files: Record<string, string>,
): Promise<void> {
  const folder = `..2026_11_23_00_00_0${generation}.000000001`;
  await mkdir(path.join(dir, folder));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, folder, name), text);
  await symlink(folder, path.join(dir, '..data_tmp'));
  await rename(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  // As the kubelet does: a key's visible symlink is made once and keeps pointing into `..data`,
  // so an update swaps `..data` alone (removing and remaking these would be a window no kubelet opens).
  for (const name of Object.keys(files)) {
    await symlink(path.join('..data', name), path.join(dir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
  if (generation > 1)
    await rm(path.join(dir, `..2026_11_23_00_00_0${generation - 1}.000000001`), {
      recursive: true,
      force: true,
    });
}

describe('a file source on a ConfigMap volume', () => {
  it('lists each file once, by its visible name, and never a symlink that leads out of the folder', async () => {
    const t = await tempDir();
    try {
      const dir = path.join(t.dir, 'mesh');
      await mkdir(dir);
      await projectConfigMap(dir, 1, {
        'cart.yaml': plainServiceEntry('cart'),
        'shop.yaml': plainServiceEntry('shop'),
      });
      await writeFile(path.join(t.dir, 'outside.yaml'), plainServiceEntry('outside'));
      await symlink(path.join(t.dir, 'outside.yaml'), path.join(dir, 'outside.yaml'));
      assert.deepEqual(
        (await listYamlFiles(dir)).files.map((f) => path.relative(dir, f)),
        ['cart.yaml', 'shop.yaml'],
      );
    } finally {
      await t.dispose();
    }
  });

  it('serves an update of the ConfigMap as one change, without warnings about copies in old folders', async () => {
    const t = await tempDir();
    const dir = path.join(t.dir, 'mesh');
    await mkdir(dir);
    await projectConfigMap(dir, 1, {
      'cart.yaml': plainServiceEntry('cart'),
      'shop.yaml': plainServiceEntry('shop'),
    });
    const recorder = new SourceEventRecorder(
      new FileSource({ name: 'configmap', path: dir, defaultNamespace: 'default', rescanMs: 30 }).events$,
    );
    try {
      const first = await recorder.snapshot();
      assert.deepEqual([...first.resources].map((r) => r.name).sort(), ['cart', 'shop']);
      assert.deepEqual(first.warnings, []);
      await projectConfigMap(dir, 2, {
        'cart.yaml': plainServiceEntry('cart', 'cart.new.example.com'),
        'shop.yaml': plainServiceEntry('shop'),
      });
      const next = (await recorder.next(
        (e) =>
          e.type === 'snapshot' &&
          [...e.resources].some(
            (r) => r.name === 'cart' && new TextDecoder().decode(r.body).includes('cart.new.example.com'),
          ),
      )) as SourceSnapshotEvent;
      assert.deepEqual([...next.resources].map((r) => r.name).sort(), ['cart', 'shop']);
      assert.deepEqual(
        next.warnings.map((w) => w.message),
        [],
        'no "also defined in" another folder',
      );
      assert.deepEqual(next.errors, []);
    } finally {
      recorder.close();
      await t.dispose();
    }
  });
});
