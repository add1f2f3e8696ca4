import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJsonl, selectTasks } from '../../tasks/loaders.js';

const fixture = (f: string) => path.join(import.meta.dirname, '..', 'fixtures', 'datasets', f);

describe('task loaders', () => {
  it('parse SWE-bench rows (test lists as JSON strings)', () => {
    const { tasks, errors } = loadJsonl(fixture('swe-bench.jsonl'), { onBadRow: 'fail' });
    expect(errors).toEqual([]);
    expect(tasks.map((t) => t.instanceId)).toEqual(['astropy__astropy-12907', 'django__django-11099']);
    expect(tasks[0]).toMatchObject({ repo: 'astropy/astropy', version: '4.3', baseCommit: 'd16bfe05a744909de4b27f5875fe0d4ed41ce607', layout: 'swe-bench' });
    // SWE-bench rows name no image: the harness's instance image, as swebench publishes it
    expect(tasks[0].source).toEqual({ kind: 'image', image: 'docker.io/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest' });
    expect(tasks[1].source).toEqual({ kind: 'image', image: 'docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest' });
    expect(tasks[0].failToPass).toEqual(['astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]']);
    expect(tasks[0].passToPass).toHaveLength(2);
    expect(tasks[1].passToPass).toEqual([]);
  });

  it('parse the SWE-Gym, R2E-Gym and SWE-rebench variants', () => {
    const gym = loadJsonl(fixture('swe-gym.jsonl'), { onBadRow: 'fail', layout: 'swe-gym' }).tasks[0];
    expect(gym.failToPass).toEqual(['tests/test_ssm/test_ssm_boto3.py::test_put_parameter_invalid_names']);
    expect(gym.layout).toBe('swe-gym');
    expect(gym.source).toEqual({ kind: 'image', image: `docker.io/xingyaoww/sweb.eval.x86_64.${gym.instanceId.toLowerCase().replace(/__/g, '_s_')}:latest` });
    // an R2E-Gym row as published (test/fixtures/r2e: no instance id, tests in the image)
    const r2e = loadJsonl(path.join(import.meta.dirname, '..', 'fixtures', 'r2e', 'rows', 'r2e-gym.jsonl'), { onBadRow: 'fail' }).tasks[0];
    expect(r2e).toMatchObject({ layout: 'r2e-gym', repo: 'tinyfmt', testPatch: '', source: { kind: 'image', image: expect.stringMatching(/^namanjain12\/tinyfmt_final:/) } });
    expect(r2e.instanceId).toBe(`tinyfmt_${r2e.source.kind === 'image' ? r2e.source.image.split(':')[1] : ''}`);
    expect(Object.keys(r2e.expectedOutputs ?? {}).length).toBeGreaterThan(0);
    const rebench = loadJsonl(fixture('swe-rebench.jsonl'), { onBadRow: 'fail' }).tasks[0];
    expect(rebench.source).toEqual({ kind: 'image', image: 'swerebench/sweb.eval.x86_64.python-attrs_1776_attrs-1321' });
    // a row's own image wins over the layout's naming
    expect(loadJsonl(fixture('swe-rebench.jsonl'), { onBadRow: 'fail', layout: 'swe-bench' }).tasks[0].source).toEqual(rebench.source);
  });

  it('report each bad row with its line number and field', () => {
    const { tasks, errors } = loadJsonl(fixture('bad-rows.jsonl'), { onBadRow: 'skip' });
    expect(tasks.map((t) => t.instanceId)).toEqual(['astropy__astropy-12907']);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^bad-rows\.jsonl:2: field \(row\): not valid JSON/),
      expect.stringMatching(/^bad-rows\.jsonl:3: field FAIL_TO_PASS: must be a JSON array/),
      expect.stringMatching(/^bad-rows\.jsonl:4: field repo: missing/),
      expect.stringMatching(/^bad-rows\.jsonl:6: field problem_statement: /),
    ]);
  });

  it('fail the whole load when asked to, naming every bad row', () => {
    expect(() => loadJsonl(fixture('bad-rows.jsonl'), { onBadRow: 'fail' })).toThrow(/4 bad task row\(s\):[\s\S]*bad-rows\.jsonl:2[\s\S]*bad-rows\.jsonl:6[\s\S]*onBadRow: 'skip'/);
  });
});

describe('pool selection', () => {
  it('keeps held-out task ids out of the pool, before the limit, and names unknown ones', () => {
    const all = selectTasks({ source: 'toy', include: [], limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks.map((t) => t.instanceId);
    const held = all.slice(0, 2);
    const pool = selectTasks({ source: 'toy', include: [], limit: 3, excludeLooseTests: true, onBadRow: 'fail', exclude: held }).tasks.map((t) => t.instanceId);
    expect(pool).toEqual(all.slice(2, 5));
    expect(() => selectTasks({ source: 'toy', include: [], limit: 0, excludeLooseTests: true, onBadRow: 'fail', exclude: ['toy__nope'] })).toThrow(/evaluation\.heldOut names unknown task ids: toy__nope/);
  });
});
