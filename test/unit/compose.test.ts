import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';

/** docker-compose.yml cannot run here (no Docker engine); check that it parses and that it
 *  names the services and ports docs/guides/operations.md describes. */
const root = path.join(import.meta.dirname, '..', '..');

const GUIDE = 'docs/guides/operations.md';

function documentedServices(): { service: string; port: string }[] {
  const guide = fs.readFileSync(path.join(root, GUIDE), 'utf8');
  const table = /<!-- compose-services -->([\s\S]*?)<!-- \/compose-services -->/.exec(guide);
  expect(table, `${GUIDE} has a compose-services table`).not.toBeNull();
  return table![1].split('\n').filter((l) => l.startsWith('| `')).map((l) => {
    const cells = l.split('|').map((c) => c.trim());
    return { service: /`([^`]+)`/.exec(cells[1])![1], port: cells[3] };
  });
}

describe('docker-compose.yml', () => {
  const compose = YAML.parse(fs.readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true });

  it('parses and declares the services the operations guide lists, with their ports, published on loopback only', () => {
    const documented = documentedServices();
    expect(documented.length).toBeGreaterThan(0);
    expect(Object.keys(compose.services).sort()).toEqual(documented.map((d) => d.service).sort());
    for (const d of documented) {
      const ports: string[] = compose.services[d.service].ports ?? [];
      if (d.port === '–') expect(ports).toEqual([]);
      else expect(ports).toEqual([`127.0.0.1:${d.port}:${d.port}`]);
    }
  });

  it('wires the workers to Temporal, Postgres and a container engine', () => {
    for (const w of ['floe-control', 'floe-sandbox', 'floe-gpu']) {
      expect(compose.services[w].environment.FLOE_TEMPORAL_ADDRESS).toBe('temporal:7233');
      expect(compose.services[w].environment.FLOE_DATABASE_URL).toMatch(/@postgresql:5432\//);
    }
    expect(compose.services['floe-sandbox'].environment.DOCKER_HOST).toMatch(/^unix:\/\//);
    expect(compose.services.temporal.environment.DB).toBe('postgres12');
    expect(fs.existsSync(path.join(root, compose.services['floe-control'].build, 'Dockerfile'))).toBe(true);
  });
});
