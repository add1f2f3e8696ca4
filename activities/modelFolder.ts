import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createXXHash128 } from 'hash-wasm';

/** The published model folder (engine/floe_engine/checkpoint.py writes it): config.json,
 *  tokenizer files and safetensors shards for HF models, model.safetensors for the tiny
 *  policy, and checkpoint.json listing each file's digest: XXH3-128 (`checksum: "xxh3-128"`,
 *  records `xxh3_128`: floe-checkpoint-3) or sha256 (records `sha256`: floe-checkpoint-2 and
 *  -3 without the xxhash package; floe-checkpoint-1: the top-level `sha256`). floe verifies the
 *  folder on the engine's node before any engine loads it (vLLM and SGLang check nothing). */

export interface FolderCheck { folder: string; version: number | null; files: number; bytes: number; ms: number }

type Algorithm = 'sha256' | 'xxh3-128';
interface FileRecord { sha256?: string; xxh3_128?: string; bytes?: number }
interface Sidecar { format?: string; version?: number; checksum?: string; sha256?: string; files?: Record<string, FileRecord> }

/** A published version's folder, from the trainer's answer (a folder, or its model.safetensors). */
export const modelFolder = (p: string): string => (p.endsWith('.safetensors') ? path.dirname(p) : p);

/** A file's digest, as Python's hashlib.sha256 / xxhash.xxh3_128 hexdigest() print it. */
export async function fileDigest(file: string, algo: Algorithm): Promise<string> {
  const stream = fs.createReadStream(file, { highWaterMark: 1 << 22 });
  if (algo === 'sha256') {
    const h = createHash('sha256');
    for await (const chunk of stream) h.update(chunk as Buffer);
    return h.digest('hex');
  }
  const h = await createXXHash128();
  h.init();
  for await (const chunk of stream) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** What a `files` record promises: the algorithm its own key names. */
function expected(rec: FileRecord): { algo: Algorithm; digest: string } | null {
  if (rec.xxh3_128) return { algo: 'xxh3-128', digest: rec.xxh3_128 };
  if (rec.sha256) return { algo: 'sha256', digest: rec.sha256 };
  return null;
}

/** Check every file the sidecar lists against its digest (floe-checkpoint-1 folders: the one
 *  model.safetensors). Throws naming the folder, the file and what to do. */
export async function verifyModelFolder(p: string): Promise<FolderCheck> {
  const started = Date.now();
  const folder = modelFolder(p);
  const side = path.join(folder, 'checkpoint.json');
  if (!fs.existsSync(side)) throw new Error(`${folder} has no checkpoint.json; floe loads only folders its trainer published (engine/floe_engine/checkpoint.py)`);
  const meta = JSON.parse(fs.readFileSync(side, 'utf8')) as Sidecar;
  if (meta.checksum !== undefined && meta.checksum !== 'sha256' && meta.checksum !== 'xxh3-128') {
    throw new Error(`${side} names checksum ${JSON.stringify(meta.checksum)}, which this floe does not know (sha256, xxh3-128); update floe, or republish the version with FLOE_CHECKSUM=sha256`);
  }
  const files: Record<string, FileRecord> | null = meta.files ?? (meta.sha256 ? { 'model.safetensors': { sha256: meta.sha256 } } : null);
  if (!files || Object.keys(files).length === 0) throw new Error(`${side} lists no files and no checksums; republish the version with the current trainer`);
  let bytes = 0;
  for (const [name, want] of Object.entries(files)) {
    const f = path.join(folder, name);
    if (!fs.existsSync(f)) throw new Error(`${folder}: ${name} is listed in checkpoint.json but missing; the publish did not finish or the folder was changed`);
    const exp = expected(want);
    if (!exp) throw new Error(`${side}: the record of ${name} has no digest (xxh3_128 or sha256); republish the version with the current trainer`);
    const got = await fileDigest(f, exp.algo);
    if (got !== exp.digest) throw new Error(`${folder}: ${name} has ${exp.algo} ${got.slice(0, 12)}… but checkpoint.json says ${exp.digest.slice(0, 12)}…; the file is corrupt or was changed after publishing (republish the version)`);
    bytes += fs.statSync(f).size;
  }
  return { folder, version: meta.version ?? null, files: Object.keys(files).length, bytes, ms: Date.now() - started };
}
