import { dockerFromSettings } from '../infra/docker.js';
import type { Settings } from '../infra/settings.js';
import { selectTasks } from '../tasks/loaders.js';
import { imageLoadHint, type TaskLayout } from '../core/taskLayouts.js';
import { preflightImages } from '../activities/sandbox/images.js';

/** `floe tasks check`: what a run's pool would be, before starting one — its rows (bad ones
 *  named with line and field), each row's layout and image, and whether every image is on the
 *  container host (pulled with --pull when a registry answers), with how to load a missing one. */
export async function checkTasks(s: Settings, o: { source: string; layout: TaskLayout | 'auto'; pull: boolean; json: boolean }): Promise<number> {
  const { tasks, errors } = selectTasks({ source: o.source, layout: o.layout, include: [], limit: 0, excludeLooseTests: false, onBadRow: 'skip' });
  const images = [...new Set(tasks.flatMap((t) => (t.source.kind === 'image' ? [t.source.image] : [])))].sort();
  const docker = dockerFromSettings(s);
  const pre = await preflightImages(docker, images, { pull: o.pull });
  const byLayout = new Map<string, number>();
  for (const t of tasks) byLayout.set(t.layout, (byLayout.get(t.layout) ?? 0) + 1);
  const { missing } = pre;
  if (o.json) {
    console.log(JSON.stringify({ tasks: tasks.map((t) => ({ id: t.instanceId, layout: t.layout, repo: t.repo, image: t.source.kind === 'image' ? t.source.image : null })), badRows: errors.map((e) => e.message), images: pre }, null, 2));
  } else {
    console.log(`${tasks.length} task(s) in ${o.source}: ${[...byLayout].map(([l, n]) => `${n} ${l}`).join(', ') || 'none'}`);
    for (const e of errors) console.log(`bad row  ${e.message}`);
    if (images.length) console.log(`${images.length - missing.length} of ${images.length} image(s) on ${s.docker.host}${pre.pulled.length ? ` (${pre.pulled.length} pulled)` : ''}`);
    for (const m of missing) console.log(`missing  ${m.image}${o.pull ? `\n         pull failed: ${m.pullError}` : ''}\n         fix: ${imageLoadHint(m.image)}`);
  }
  return errors.length === 0 && missing.length === 0 && tasks.length > 0 ? 0 : 1;
}
