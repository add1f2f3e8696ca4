import { Renderers } from '../../activities/renderer.js';
import { loadSettings, repoRoot } from '../../infra/settings.js';

/** A process whose only pending work is a renderer reply (as the warm start's is): it must
 *  wait for the reply, print it, and then exit by itself. Used by test/tokenPath.test.ts. */
const s = loadSettings();
const renderers = new Renderers({ python: s.python.bin, home: s.home, repoRoot });
const r = await renderers.get({ tokenizer: 'byte', chatTemplate: 'configs/templates/plain.jinja' });
process.stdout.write(`${JSON.stringify((await r.start([{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }], [])).text)}\n`);
