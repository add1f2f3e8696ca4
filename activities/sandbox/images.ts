import type Docker from 'dockerode';
import { ApplicationFailure } from '@temporalio/common';
import { imageLoadHint } from '../../core/taskLayouts.js';
import { heartbeat } from './heartbeat.js';

/** The pool's image preflight: before any rollout starts, every task image must be on this
 *  host. A missing one is pulled when a registry answers; what is still missing refuses the
 *  run, naming each image and how to load it. */

export interface ImagePreflight { present: string[]; pulled: string[]; missing: { image: string; pullError: string }[] }

async function exists(docker: Docker, image: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect();
    return true;
  } catch {
    return false;
  }
}

/** Pull one image (dockerode's pull + followProgress); the error text when it cannot. */
async function pull(docker: Docker, image: string, timeoutMs: number): Promise<string | null> {
  try {
    const stream = await docker.pull(image);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      docker.modem.followProgress(stream, (err) => { clearTimeout(timer); if (err) reject(err); else resolve(); }, () => heartbeat(`pulling ${image}`));
    });
    return (await exists(docker, image)) ? null : 'the pull ended but the image is not there';
  } catch (err) {
    return (err as Error).message.split('\n')[0].slice(0, 300);
  }
}

/** o.pull false: only look (a missing image is reported, not pulled). */
export async function preflightImages(docker: Docker, images: string[], o: { pull?: boolean; pullTimeoutMs?: number } = {}): Promise<ImagePreflight> {
  const out: ImagePreflight = { present: [], pulled: [], missing: [] };
  if (images.length === 0) return out;
  // an engine that does not answer says nothing about images: no image may read as missing
  await docker.ping().catch((err: unknown) => {
    throw new Error(`the container engine does not answer (${(err as Error).message}); start it (\`floe up\`, or point DOCKER_HOST at yours) and try again`);
  });
  for (const image of [...new Set(images)].sort()) {
    heartbeat(`checking ${image}`);
    if (await exists(docker, image)) { out.present.push(image); continue; }
    const err = o.pull === false ? 'not pulled (asked only to look)' : await pull(docker, image, o.pullTimeoutMs ?? 600_000);
    if (err === null) out.pulled.push(image);
    else out.missing.push({ image, pullError: err });
  }
  return out;
}

/** The run's refusal: every missing image with its load command. */
export function missingImagesFailure(host: string, missing: ImagePreflight['missing']): ApplicationFailure {
  const lines = missing.map((m) => `  ${m.image}\n    pull failed: ${m.pullError}\n    fix: ${imageLoadHint(m.image)}`);
  return ApplicationFailure.nonRetryable(
    `${missing.length} task image(s) missing on sandbox host ${host}, and no registry gave them; no rollout was started:\n${lines.join('\n')}`,
    'ImagesMissing',
  );
}
