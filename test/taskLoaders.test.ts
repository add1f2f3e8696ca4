import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadJsonl } from '../tasks/loaders.js';

const fixture = (f: string) => path.join(import.meta.dirname, 'fixtures', 'datasets', f);

describe('task loaders', () => {
  it('parse SWE-bench rows (test lists as JSON strings)', () => {
    const { tasks, errors } = loadJsonl(fixture('swe-bench.jsonl'), { onBadRow: 'fail' });
    expect(errors).toEqual([]);
    expect(tasks.map((t) => t.instanceId)).toEqual(['astropy__astropy-12907', 'django__django-11099']);
    expect(tasks[0]).toMatchObject({ repo: 'astropy/astropy', version: '4.3', baseCommit: 'd16bfe05a744909de4b27f5875fe0d4ed41ce607', source: { kind: 'git' } });
    expect(tasks[0].failToPass).toEqual(['astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]']);
    expect(tasks[0].passToPass).toHaveLength(2);
    expect(tasks[1].passToPass).toEqual([]);
  });

  it('parse the SWE-Gym, R2E-Gym and SWE-rebench variants', () => {
    const gym = loadJsonl(fixture('swe-gym.jsonl'), { onBadRow: 'fail' }).tasks[0];
    expect(gym.failToPass).toEqual(['tests/test_ssm/test_ssm_boto3.py::test_put_parameter_invalid_names']);
    const r2e = loadJsonl(fixture('r2e-gym.jsonl'), { onBadRow: 'fail' }).tasks[0];
    expect(r2e).toMatchObject({ repo: 'pandas', baseCommit: 'abc123def456', source: { kind: 'image', image: 'namanjain12/pandas_final:abc123' } });
    const rebench = loadJsonl(fixture('swe-rebench.jsonl'), { onBadRow: 'fail' }).tasks[0];
    expect(rebench.source).toEqual({ kind: 'image', image: 'swerebench/sweb.eval.x86_64.python-attrs_1776_attrs-1321' });
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
