/** The chaos suite (issue 17): crashes during a real run, hostile sandboxes, bad model output,
 *  bad input and exposure, each case recorded as it ends (test/helpers/chaos.ts).
 *
 *    npm run chaos            (= floe up --test, then: npx tsx bench/chaos.ts [vitest filters…])
 *
 *  Runs test/chaos/ with the test configuration (the same files run in `npm test`), then folds
 *  the cases into bench/results/chaos.json: each case (suite, name, survived, what stopped it,
 *  rollouts lost and counted twice where it ran rollouts) and the totals. Exits as vitest did.
 *  `--fold`: run nothing; fold the cases an earlier run left (`npm test` records them too). */
import { spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../infra/settings.js';
import { chaosFile, readChaosCases } from '../test/helpers/chaos.js';

const fold = process.argv.includes('--fold');
const filters = process.argv.slice(2).filter((a) => a !== '--fold');
const t0 = Date.now();
if (!fold) fs.rmSync(chaosFile(), { force: true });
const vitest = fold ? { status: 0 } : spawnSync(path.join(repoRoot, 'node_modules', '.bin', 'vitest'), ['run', ...(filters.length ? filters : ['test/chaos/'])], { cwd: repoRoot, stdio: 'inherit' });
const cases = readChaosCases();
const sum = (k: 'rolloutsLost' | 'countedTwice') => cases.reduce((n, c) => n + (c[k] ?? 0), 0);
const suites = [...new Set(cases.map((c) => c.suite))];
let commit = 'unknown';
try { commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim(); } catch { /* not a checkout */ }
const out = {
  when: new Date().toISOString(),
  commit,
  command: fold ? 'the cases of an earlier run (npm test), folded: npx tsx bench/chaos.ts --fold' : `npm run chaos${filters.length ? ` -- ${filters.join(' ')}` : ''}`,
  seconds: fold ? Math.round(cases.reduce((n, c) => n + c.ms, 0) / 1000) : Math.round((Date.now() - t0) / 1000),
  vitestExit: fold ? null : vitest.status,
  tried: cases.length,
  survived: cases.filter((c) => c.survived).length,
  rolloutsLost: sum('rolloutsLost'),
  countedTwice: sum('countedTwice'),
  bySuite: Object.fromEntries(suites.map((s) => [s, { tried: cases.filter((c) => c.suite === s).length, survived: cases.filter((c) => c.suite === s && c.survived).length }])),
  cases,
};
const file = path.join(repoRoot, 'bench', 'results', 'chaos.json');
fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
console.log(`chaos: ${out.survived} of ${out.tried} cases survived; rollouts lost ${out.rolloutsLost}, counted twice ${out.countedTwice}; ${path.relative(repoRoot, file)}`);
for (const c of cases.filter((x) => !x.survived)) console.log(`  NOT SURVIVED ${c.suite} / ${c.name}: ${c.detail.split('\n')[0]}`);
process.exit(fold ? (cases.every((c) => c.survived) ? 0 : 1) : (vitest.status ?? 1));
