import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { parseRunConfig } from '../../core/config.js';
import { rolloutSettings } from '../../core/contracts.js';
import { canonicalJson, generationSettings, SETTINGS_NOT_KEPT, SettingsKeeper, settingsRef, type GenerationSettings } from '../../core/generationSettings.js';
import { createGenerateActivities } from '../../activities/generate.js';
import { LiveRouter } from '../../activities/router.js';
import type { Renderers } from '../../activities/renderer.js';

const base = (): GenerationSettings => generationSettings({
  ...rolloutSettings(parseRunConfig({ name: 'gs' })),
  engines: [{ id: 'e0', url: 'http://127.0.0.1:1', node: 'local', kind: 'reference' }],
});

describe('generation settings by reference', () => {
  it('the reference is a function of the content, not of key order', () => {
    const g = base();
    const reordered = Object.fromEntries(Object.entries(g).reverse()) as GenerationSettings;
    expect(canonicalJson(reordered)).toBe(canonicalJson(g));
    expect(settingsRef(reordered)).toBe(settingsRef(g));
    expect(settingsRef(g)).toMatch(/^g1-[0-9a-f]{16}-\d+$/);
  });

  it('negative controls: any change of a setting changes the reference', () => {
    const g = base();
    const refs = new Set([
      settingsRef(g),
      settingsRef({ ...g, systemPrompt: `${g.systemPrompt} ` }),
      settingsRef({ ...g, engines: [{ ...g.engines[0], url: 'http://127.0.0.1:2' }] }),
      settingsRef({ ...g, sampling: { ...g.sampling, temperature: 0.5 } }),
      settingsRef({ ...g, frozenVersion: 3 }),
      settingsRef({ ...g, frozenVersion: 4 }),
      settingsRef({ ...g, router: 'sticky' }),
    ]);
    expect(refs.size).toBe(7);
  });

  it('a keeper keeps what it is sent under its own reference and refuses another', () => {
    const k = new SettingsKeeper(2);
    const g = base();
    expect(k.get(settingsRef(g))).toBeNull();
    expect(k.keep(settingsRef(g), g)).toBe(g);
    expect(k.get(settingsRef(g))).toEqual(g);
    const other = { ...g, systemPrompt: 'other' };
    expect(() => k.keep(settingsRef(g), other)).toThrow(/hash to g1-/);
    // the least recently used goes first
    const third = { ...g, systemPrompt: 'third' };
    k.keep(settingsRef(other), other);
    k.get(settingsRef(g));
    k.keep(settingsRef(third), third);
    expect(k.size).toBe(2);
    expect(k.get(settingsRef(other))).toBeNull();
    expect(k.get(settingsRef(g))).toEqual(g);
    expect(() => new SettingsKeeper(0)).toThrow(/positive integer/);
  });

  it('the generate activity answers SettingsNotKept for a reference it does not hold, and refuses a wrong one', async () => {
    // nothing past the settings is reached: no database, no renderer
    const acts = createGenerateActivities(null as unknown as pg.Pool, new LiveRouter(), null as unknown as Renderers);
    const ids = { runId: 'r', rolloutId: 'r-0', turnIndex: 1, taskId: 't' };
    const g = base();
    await expect(acts.generateTurn({ ...ids, settingsRef: settingsRef(g) })).rejects.toMatchObject({ type: SETTINGS_NOT_KEPT, nonRetryable: true });
    await expect(acts.generateTurn({ ...ids, settingsRef: settingsRef(g), settings: { ...g, systemPrompt: 'x' } })).rejects.toMatchObject({ type: 'SettingsRefMismatch', nonRetryable: true });
  });
});
