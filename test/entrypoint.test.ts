import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../infra/settings.js';
import { killGroup } from './helpers/cli.js';

/** The floe CLI's entry point lets floe handle Ctrl-C itself even while its event loop is busy.
 *  The tsx CLI does not: it runs the script in a child process, relays the signal, and when the
 *  child has not acknowledged it within 30 ms (node_modules/tsx/dist/cli.mjs, `relaySignalToChild`)
 *  kills it with SIGKILL — CI caught a demo killed that way half-way through its Ctrl-C ending
 *  (test/demoResume.test.ts: its run's rollouts left Running, its runs row 'running').
 *  `bin/floe` runs node itself with tsx's loader, and `npm run demo` / `npm run floe` go
 *  through it. The helper keeps its main thread busy 400 ms at a time and prints `handled` from
 *  its SIGINT handler. */

const HELPER = path.join(repoRoot, 'test', 'helpers', 'busyOnSigint.ts');

/** Start `argv` in its own process group, wait for `ready`, Ctrl-C the group as a terminal does,
 *  and return what it printed and how it ended. */
function interruptWhenReady(argv: string[]): Promise<{ out: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: repoRoot, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let sent = false;
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!sent && out.includes('ready')) {
        sent = true;
        setTimeout(() => killGroup(child, 'SIGINT'), 300);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(timer); resolve({ out, code }); });
  });
}

/** bin/floe's launch line with the helper in place of cli/floe.ts, run as bin/floe runs it. */
function binFloeWith(script: string): string[] {
  const text = fs.readFileSync(path.join(repoRoot, 'bin', 'floe'), 'utf8');
  const exec = text.split('\n').find((l) => l.startsWith('exec '));
  expect(exec, 'bin/floe has an exec line').toBeDefined();
  expect(exec).toContain('"$here/cli/floe.ts"');
  return ['bash', '-c', `here=${JSON.stringify(repoRoot)}; ${exec!.replace('"$here/cli/floe.ts"', JSON.stringify(script))}`];
}

describe('the CLI entry point and Ctrl-C', () => {
  it('npm run demo and npm run floe go through bin/floe', () => {
    const scripts = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.demo).toMatch(/(^|&& )bin\/floe demo$/);
    expect(scripts.floe).toBe('bin/floe');
  });

  it("bin/floe's process runs its own SIGINT handler while its event loop is busy", async () => {
    const r = await interruptWhenReady(binFloeWith(HELPER));
    expect(r.out).toContain('handled');
    expect(r.code).toBe(0);
  }, 90_000);

  it('negative control: under the tsx CLI the same process is killed before its handler runs', async () => {
    const r = await interruptWhenReady([path.join(repoRoot, 'node_modules', '.bin', 'tsx'), HELPER]);
    expect(r.out).toContain('ready');
    expect(r.out).not.toContain('handled');
  }, 90_000);
});
