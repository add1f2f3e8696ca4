import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The published model folder (engine/floe_engine/checkpoint.py writes it): config.json,
 *  tokenizer files and safetensors shards for HF models, model.safetensors for the tiny
 *  policy, and checkpoint.json listing each file's sha256. floe verifies the folder on the
 *  engine's node before any engine loads it. */

export interface FolderCheck { folder: string; version: number | null; files: number; bytes: number; ms: number }

interface Sidecar { format?: string; version?: number; sha256?: string; files?: Record<string, { sha256: string; bytes?: number }> }

/** A published version's folder, from the trainer's answer (a folder, or its model.safetensors). */
export const modelFolder = (p: string): string => (p.endsWith('.safetensors') ? path.dirname(p) : p);

async function sha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 22 })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Check every file the sidecar lists against its sha256 (floe-checkpoint-1 folders: the one
 *  model.safetensors). Throws naming the folder, the file and what to do. */
export async function verifyModelFolder(p: string): Promise<FolderCheck> {
  const started = Date.now();
  const folder = modelFolder(p);
  const side = path.join(folder, 'checkpoint.json');
  if (!fs.existsSync(side)) throw new Error(`${folder} has no checkpoint.json; floe loads only folders its trainer published (engine/floe_engine/checkpoint.py)`);
  const meta = JSON.parse(fs.readFileSync(side, 'utf8')) as Sidecar;
  const files = meta.files ?? (meta.sha256 ? { 'model.safetensors': { sha256: meta.sha256 } } : null);
  if (!files || Object.keys(files).length === 0) throw new Error(`${side} lists no files and no sha256; republish the version with the current trainer`);
  let bytes = 0;
  for (const [name, want] of Object.entries(files)) {
    const f = path.join(folder, name);
    if (!fs.existsSync(f)) throw new Error(`${folder}: ${name} is listed in checkpoint.json but missing; the publish did not finish or the folder was changed`);
    const got = await sha256(f);
    if (got !== want.sha256) throw new Error(`${folder}: ${name} has sha256 ${got.slice(0, 12)}… but checkpoint.json says ${want.sha256.slice(0, 12)}…; the file is corrupt or was changed after publishing (republish the version)`);
    bytes += fs.statSync(f).size;
  }
  return { folder, version: meta.version ?? null, files: Object.keys(files).length, bytes, ms: Date.now() - started };
}
