import fs from 'node:fs';
import type { Settings } from './settings.js';
import { COMPONENTS, type Health } from './components/index.js';

/** floe up / down / doctor over every component. */

export async function up(s: Settings, opts: { only?: string[]; test?: boolean } = {}): Promise<void> {
  for (const dir of [s.home, s.dataDir, s.logDir, s.runDir]) fs.mkdirSync(dir, { recursive: true });
  for (const c of COMPONENTS) {
    if (opts.only && !opts.only.includes(c.name)) continue;
    if (c.testOnly && !opts.test && !opts.only?.includes(c.name)) continue;
    await c.up(s);
  }
}

export async function down(s: Settings): Promise<void> {
  for (const c of [...COMPONENTS].reverse()) await c.down(s);
}

export async function doctor(s: Settings): Promise<{ name: string; health: Health }[]> {
  const out: { name: string; health: Health }[] = [];
  for (const c of COMPONENTS) {
    let health: Health;
    try {
      health = await c.doctor(s);
    } catch (err) {
      health = { ok: false, detail: (err as Error).message, fix: 'run `floe up`' };
    }
    out.push({ name: c.name, health });
  }
  return out;
}
