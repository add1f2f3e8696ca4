import { describe, expect, it } from 'vitest';
import { floe } from './helpers/cli.js';

describe('floe doctor', () => {
  it('reports Temporal (with the UI address), Postgres, the container engine and the base image as healthy', async () => {
    const r = await floe(['doctor', '--json']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const report: { name: string; health: { ok: boolean; detail: string } }[] = JSON.parse(r.stdout);
    const byName = Object.fromEntries(report.map((c) => [c.name, c.health]));
    for (const name of ['temporal', 'postgres', 'podman', 'image']) expect(byName[name]?.ok, name).toBe(true);
    expect(byName.temporal.detail).toMatch(/Web UI http:\/\/\S+:\d+/);
    expect(byName.postgres.detail).toMatch(/schema version \d+/);
    expect(byName.image.detail).toMatch(/floe-sandbox:[0-9a-f]{12} present/);
  });

  it('names what failed and what to do when a service is down', async () => {
    const r = await floe(['doctor'], { FLOE_TEMPORAL_ADDRESS: '127.0.0.1:1', FLOE_TEMPORAL_HOST: '127.0.0.1', FLOE_TEMPORAL_PORT: '1', FLOE_DATABASE_URL: 'postgres://floe@127.0.0.1:1/floe' });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/FAIL temporal .*\n\s+→ check FLOE_TEMPORAL_ADDRESS/);
    expect(r.stdout).toMatch(/FAIL postgres .*\n\s+→ check FLOE_DATABASE_URL/);
  });
});
