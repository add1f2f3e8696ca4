/** A plain script that grades one patch of a toy task with activities/grading.ts' gradePatch
 *  and prints the result as JSON: what a user's own script does (no worker, no Temporal).
 *  Usage: npx tsx test/helpers/gradeOne.ts <toy task id> [gold|empty] [run label]
 *  It exits 0 after printing; before issue 43 the harness process was unref'd with its reply
 *  pending, Node's event loop emptied mid-grade and the script exited 13 with nothing printed. */
import { dockerFromSettings } from '../../infra/docker.js';
import { sandboxImageTag } from '../../infra/components/image.js';
import { loadSettings } from '../../infra/settings.js';
import { loadToySuite } from '../../tasks/loaders.js';
import { gradePatch } from '../../activities/grading.js';

const [id, which = 'gold', run = 'script'] = process.argv.slice(2);
const task = loadToySuite({ onBadRow: 'fail' }).tasks.find((t) => t.instanceId === id);
if (!task) throw new Error(`no toy task ${id ?? '(none given)'}: name one of the toy suite's instance ids`);
const settings = loadSettings();
const result = await gradePatch(dockerFromSettings(settings), {
  host: 'script', image: sandboxImageTag(settings), workerId: `script-${process.pid}`, harnessPython: settings.harness.bin,
}, { task, diff: which === 'gold' ? task.patch : '', labels: { 'floe.purpose': 'script', 'floe.run': run } });
console.log(JSON.stringify({ task: id, patch: which, passed: result.passed, tests: result.tests }));
