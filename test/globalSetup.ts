import { dockerFromSettings } from '../infra/docker.js';
import { loadSettings } from '../infra/settings.js';

/** After the whole suite: no sandbox or grader container may be left behind. */
export async function teardown(): Promise<void> {
  const docker = dockerFromSettings(loadSettings());
  const left = await docker.listContainers({ all: true, filters: { label: ['floe.sandbox=1'] } });
  if (left.length) {
    const names = left.map((c) => `${c.Id.slice(0, 12)} ${JSON.stringify(c.Labels)}`).join('\n  ');
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    throw new Error(`${left.length} container(s) left after the test suite (now removed):\n  ${names}`);
  }
}
