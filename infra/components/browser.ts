import fs from 'node:fs';
import type { Component, Health } from './types.js';
import { aptInstall, log } from '../proc.js';

/** Debian's Chromium, for the tests that drive the Temporal Web UI (playwright-core). Only
 *  `floe up --test` installs it: running floe does not need a browser. */
export const CHROMIUM = '/usr/bin/chromium';

export const browser: Component = {
  name: 'browser',
  testOnly: true,
  async up() {
    if (fs.existsSync(CHROMIUM)) return;
    aptInstall('browser', ['chromium']);
    log('browser', `installed ${CHROMIUM}`);
  },
  async down() { /* nothing runs */ },
  async doctor(): Promise<Health> {
    return fs.existsSync(CHROMIUM)
      ? { ok: true, detail: `${CHROMIUM} (tests only)` }
      : { ok: true, detail: 'not installed (only the Web UI tests need it; `floe up --test` installs it)' };
  },
};
