import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileDigest, verifyModelFolder } from '../activities/modelFolder.js';
import { loadSettings, repoRoot } from '../infra/settings.js';

/** activities/modelFolder.ts checks a published folder before any engine loads it: the
 *  trainer's own writer (engine/floe_engine/checkpoint.py) makes the folders here, so the
 *  digests must agree across Python (hashlib, xxhash) and Node (crypto, hash-wasm). */

const s = loadSettings();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-model-folder-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Publish a small state dict as version `version` with the trainer's writer, the checksum
 *  chosen by FLOE_CHECKSUM as a user would. */
function publish(name: string, checksum: 'xxh3-128' | 'sha256'): string {
  const out = path.join(tmp, name);
  execFileSync(s.python.bin, ['-c', `
import sys, torch
from floe_engine import checkpoint
torch.manual_seed(0)
sd = {"w": torch.randn(64, 32), "b": torch.arange(10, dtype=torch.float32)}
checkpoint.save(sd, sys.argv[1], 3, {"kind": "test"})
`, out], { cwd: path.join(repoRoot, 'engine'), env: { ...process.env, FLOE_CHECKSUM: checksum } });
  return out;
}

const sidecar = (folder: string) => JSON.parse(fs.readFileSync(path.join(folder, 'checkpoint.json'), 'utf8')) as {
  checksum?: string; sha256?: string; files: Record<string, { sha256?: string; xxh3_128?: string; bytes: number }>;
};

describe('published model folders', () => {
  it('an xxh3-128 folder verifies, and the digests match what Python wrote', async () => {
    const folder = publish('xxh3', 'xxh3-128');
    const meta = sidecar(folder);
    expect(meta.checksum).toBe('xxh3-128');
    const rec = meta.files['model.safetensors'];
    expect(rec.xxh3_128).toMatch(/^[0-9a-f]{32}$/);
    expect(await fileDigest(path.join(folder, 'model.safetensors'), 'xxh3-128')).toBe(rec.xxh3_128);
    const check = await verifyModelFolder(path.join(folder, 'model.safetensors'));
    expect(check).toMatchObject({ folder, version: 3, files: Object.keys(meta.files).length });
  }, 60_000);

  it('a sha256 folder (as floe-checkpoint-2 and hosts without xxhash write) still verifies', async () => {
    const folder = publish('sha', 'sha256');
    const meta = sidecar(folder);
    expect(meta.checksum).toBe('sha256');
    expect(meta.files['model.safetensors'].sha256).toMatch(/^[0-9a-f]{64}$/);
    expect((await verifyModelFolder(folder)).version).toBe(3);
  }, 60_000);

  it('one changed byte is caught, naming the file and the fix; so are an unknown algorithm and a record without a digest', async () => {
    for (const algo of ['xxh3-128', 'sha256'] as const) {
      const folder = publish(`bad-${algo}`, algo);
      const f = path.join(folder, 'model.safetensors');
      const bytes = fs.readFileSync(f);
      bytes[bytes.length - 1] ^= 1;
      fs.writeFileSync(f, bytes);
      await expect(verifyModelFolder(folder)).rejects.toThrow(new RegExp(`model\\.safetensors has ${algo} .*corrupt.*republish`));
    }
    const folder = publish('odd', 'xxh3-128');
    const side = path.join(folder, 'checkpoint.json');
    const meta = sidecar(folder);
    fs.writeFileSync(side, JSON.stringify({ ...meta, checksum: 'md5' }));
    await expect(verifyModelFolder(folder)).rejects.toThrow(/checksum "md5".*sha256, xxh3-128/);
    fs.writeFileSync(side, JSON.stringify({ ...meta, files: { 'model.safetensors': { bytes: 1 } } }));
    await expect(verifyModelFolder(folder)).rejects.toThrow(/has no digest/);
  }, 120_000);
});
