import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Settings } from '../settings.js';
import type { Component, Health } from './types.js';
import { aptInstall, isRoot, log, mustRun, run, which } from '../proc.js';
import { dockerFromSettings } from '../docker.js';
import { podmanEnv } from './podman.js';

/** The sandbox base image: debootstrap → podman import, tagged by the hash of its recipe so
 *  it is rebuilt only when the recipe changes. */

export function sandboxImageTag(s: Settings): string {
  const hash = crypto.createHash('sha256').update(fs.readFileSync(s.sandboxImage.recipe)).digest('hex').slice(0, 12);
  return `${s.sandboxImage.name}:${hash}`;
}

async function imageExists(s: Settings, tag: string): Promise<boolean> {
  try {
    await dockerFromSettings(s).getImage(tag).inspect();
    return true;
  } catch {
    return false;
  }
}

export const image: Component = {
  name: 'image',
  async up(s) {
    const tag = sandboxImageTag(s);
    if (await imageExists(s, tag)) {
      log('image', `${tag} present`);
      return;
    }
    if (s.docker.external) throw new Error(`image: ${tag} is missing on ${s.docker.host}; build it on a machine with podman (floe up) and load it there, or run floe up on that host`);
    if (!isRoot()) throw new Error('image: building the sandbox image needs root (debootstrap); run `sudo floe up` once');
    if (!which('debootstrap')) aptInstall('image', ['debootstrap']);
    const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-rootfs-'));
    const started = Date.now();
    try {
      log('image', `building ${tag} with debootstrap (about a minute)…`);
      mustRun('bash', [s.sandboxImage.recipe, rootfs], 'the sandbox image recipe');
      log('image', 'importing into podman…');
      const r = run('bash', ['-c', `tar -C "${rootfs}" -c . | podman import --change 'USER agent' --change 'WORKDIR /work' - ${tag}`], { env: podmanEnv(s) });
      if (r.code !== 0) throw new Error(`image: podman import failed: ${r.stderr.trim()}`);
      run('podman', ['tag', tag, `${s.sandboxImage.name}:latest`], { env: podmanEnv(s) });
    } finally {
      fs.rmSync(rootfs, { recursive: true, force: true });
    }
    log('image', `${tag} built in ${Math.round((Date.now() - started) / 1000)} s`);
  },
  async down() { /* an artefact: nothing to stop */ },
  async doctor(s): Promise<Health> {
    const tag = sandboxImageTag(s);
    return (await imageExists(s, tag))
      ? { ok: true, detail: `${tag} present` }
      : { ok: false, detail: `${tag} missing`, fix: 'run `floe up` (builds it with debootstrap, about a minute)' };
  },
};
