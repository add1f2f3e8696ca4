import { describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../core/config.js';
import { hostsItself } from '../../core/runHosting.js';

describe('hostsItself: floe run start hosts a config that names no servers', () => {
  it('the embedded default and configs/smollm2-cpu.yaml\'s shape: no endpoints, no trainer url', () => {
    expect(hostsItself(parseRunConfig({}))).toBe(true);
    expect(hostsItself(parseRunConfig({ engines: { count: 1 } }))).toBe(true);
  });
  it('servers of the user\'s own, or no engines asked for: started on the cluster (or refused by the preflight)', () => {
    const ep = [{ id: 'a', url: 'http://gpu-1:8000', kind: 'vllm' }];
    expect(hostsItself(parseRunConfig({ engines: { count: 0, endpoints: ep }, trainer: { url: 'http://127.0.0.1:8200' } }))).toBe(false);
    expect(hostsItself(parseRunConfig({ engines: { endpoints: ep } }))).toBe(false);
    expect(hostsItself(parseRunConfig({ trainer: { url: 'http://127.0.0.1:8200' } }))).toBe(false);
    expect(hostsItself(parseRunConfig({ engines: { count: 0 } }))).toBe(false);
  });
});
