import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  R2eRowError, isTestFile, normalizeStatusMap, parseLogPytest, parseR2eRow, parsedCommitPatch, ParsedCommitSchema,
} from '../../core/r2eRow.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const rowsFile = path.join(here, '..', 'fixtures', 'r2e', 'rows', 'r2e-gym.jsonl');
const row = JSON.parse(fs.readFileSync(rowsFile, 'utf8').trim()) as Record<string, unknown>;
const FIX = 'f554ccede8bf24bc2a8e50e6fe7d9c182ec6a774';

/** ParsedCommit.get_patch(test_file=False) of the fixture row, as R2E-Gym's own classes print
 *  it (the last hunk ends with the empty context line R2E-Gym's CommitParser adds for the diff's
 *  final newline; git apply ignores it). */
const GOLD = [
  'diff --git a/tinyfmt/units.py b/tinyfmt/units.py',
  'index dccf2bb..04bd2c5 100644',
  '--- a/tinyfmt/units.py',
  '+++ b/tinyfmt/units.py',
  '@@ -16,7 +16,7 @@ def format_bytes(n, precision=1):',
  '     value = float(n)',
  '     for unit in _UNITS[1:]:',
  '         value /= 1024',
  '-        if value <= 1024 or unit == _UNITS[-1]:',
  '+        if value < 1024 or unit == _UNITS[-1]:',
  '             return f"{value:.{precision}f} {unit}"',
  ' ',
  ' ',
  ' ',
  '',
].join('\n');

function withField(field: string, value: unknown): Record<string, unknown> {
  return { ...row, [field]: value };
}

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(R2eRowError);
    return (err as R2eRowError).field;
  }
  throw new Error('no error');
}

describe('parseR2eRow on the fixture row (R2E-Gym layout)', () => {
  const t = parseR2eRow(row);

  it('reads repository, image, base and issue as R2E-Gym does', () => {
    expect(t.repo).toBe('tinyfmt');
    expect(t.instanceId).toBe(`tinyfmt_${FIX}`);
    expect(t.image).toBe(`namanjain12/tinyfmt_final:${FIX}`);
    expect(t.baseCommit).toBe(`${FIX}^`);
    expect(t.problemStatement.startsWith('\n**Title:** `format_bytes`')).toBe(true);
    expect(t.problemStatement).not.toContain('[ISSUE]');
    expect(t.testPatch).toBe('');
  });

  it('derives the gold patch from parsed_commit_content: non-test Python files only', () => {
    expect(t.patch).toBe(GOLD);
    expect(t.goldPatchWithTests).toContain('diff --git a/tests/test_units.py b/tests/test_units.py');
    expect(t.goldPatchWithTests.endsWith(GOLD)).toBe(true);
    expect(t.goldPatchWithTests).not.toContain('CHANGES.rst'); // only_python
  });

  it('expected outputs as published; FAIL_TO_PASS from the run at base in execution_result_content', () => {
    expect(Object.keys(t.expectedOutputs)).toHaveLength(12);
    expect(t.expectedOutputs.test_format_bytes_locale).toBe('FAILED');
    expect(t.failToPass).toEqual(['test_format_bytes[1048576-1.0 MiB]', 'test_format_bytes_unit_boundaries']);
    expect(t.passToPass).toHaveLength(10);
    expect(t.passToPass).toContain('TestParse.test_roundtrip');
    expect(t.passToPass).toContain('test_format_bytes_locale'); // FAILED at base and at the fix
  });

  it('without execution_result_content every expected test is PASS_TO_PASS', () => {
    const u = parseR2eRow(withField('execution_result_content', undefined));
    expect(u.failToPass).toEqual([]);
    expect(u.passToPass).toHaveLength(12);
  });

  it('keeps the whole problem statement when it has no [ISSUE] tags', () => {
    expect(parseR2eRow(withField('problem_statement', 'plain issue text')).problemStatement).toBe('plain issue text');
  });
});

describe('parseR2eRow errors name the field', () => {
  it('missing or mistyped columns', () => {
    expect(fieldOf(() => parseR2eRow(withField('docker_image', undefined)))).toBe('docker_image');
    expect(fieldOf(() => parseR2eRow(withField('repo_name', 7)))).toBe('repo_name');
    expect(fieldOf(() => parseR2eRow(withField('commit_hash', '')))).toBe('commit_hash');
    expect(fieldOf(() => parseR2eRow(withField('expected_output_json', undefined)))).toBe('expected_output_json');
    expect(fieldOf(() => parseR2eRow(null))).toBe('');
    expect(() => parseR2eRow(null)).toThrow(/^R2E-Gym row: field \(row\): /);
  });

  it('bad JSON inside the JSON columns', () => {
    expect(fieldOf(() => parseR2eRow(withField('parsed_commit_content', '{not json')))).toBe('parsed_commit_content');
    expect(fieldOf(() => parseR2eRow(withField('expected_output_json', '["a"]')))).toBe('expected_output_json');
    expect(fieldOf(() => parseR2eRow(withField('expected_output_json', '{"t": 1}')))).toBe('expected_output_json.t');
    expect(fieldOf(() => parseR2eRow(withField('expected_output_json', '{}')))).toBe('expected_output_json');
    expect(fieldOf(() => parseR2eRow(withField('execution_result_content', '{"old_commit_res_stdout": 3}')))).toBe('execution_result_content.old_commit_res_stdout');
  });

  it('a parsed commit that is not R2E-Gym\'s model, or not this row\'s commit', () => {
    const pc = JSON.parse(row.parsed_commit_content as string) as { file_diffs: { hunks: { line_group: { all_lines: { type: string }[] } }[] }[]; new_commit_hash: string };
    pc.file_diffs[2].hunks[0].line_group.all_lines[1].type = 'moved';
    expect(fieldOf(() => parseR2eRow(withField('parsed_commit_content', JSON.stringify(pc)))))
      .toBe('parsed_commit_content.file_diffs.2.hunks.0.line_group.all_lines.1.type');
    const other = JSON.parse(row.parsed_commit_content as string) as { new_commit_hash: string };
    other.new_commit_hash = 'abc';
    expect(fieldOf(() => parseR2eRow(withField('parsed_commit_content', JSON.stringify(other))))).toBe('parsed_commit_content.new_commit_hash');
  });
});

describe("R2E-Gym's rules, ported", () => {
  it('parse_log_pytest: only the summary, names without the file, " - " cut for FAILED/ERROR', () => {
    const log = [
      'r2e_tests/test_1.py ..F.E                                                   [100%]',
      'FAILED r2e_tests/test_1.py::test_not_in_summary',
      '=========================== short test summary info ============================',
      'PASSED r2e_tests/test_1.py::test_plain',
      'PASSED r2e_tests/test_1.py::TestGroup::test_method',
      'PASSED r2e_tests/test_1.py::test_param[a - b]',
      'FAILED r2e_tests/test_1.py::test_broken - AssertionError: assert 1 == 2',
      'ERROR r2e_tests/test_1.py::test_setup - fixture \'frame_or_series\' not found',
      'ERROR r2e_tests/test_2.py - ModuleNotFoundError: No module named \'babel\'',
      'SKIPPED [1] r2e_tests/test_1.py:10: needs scipy',
      'XFAIL r2e_tests/test_1.py::test_xfail - reason',
      '==================== 1 failed, 3 passed, 2 errors in 0.12s =====================',
    ].join('\n');
    expect(parseLogPytest(log)).toEqual({
      test_plain: 'PASSED',
      'TestGroup.test_method': 'PASSED',
      'test_param[a - b]': 'PASSED',
      test_broken: 'FAILED',
      test_setup: 'ERROR',
      '': 'ERROR',
    });
    expect(parseLogPytest('collected 0 items\nno tests ran')).toEqual({});
    expect(parseLogPytest(null)).toEqual({});
  });

  it('parse_log_pytest on unittest_custom_runner.py output (module::Class::method)', () => {
    const log = '\n==================== short test summary info ====================\nPASSED test_1::TestImage::test_open\nFAILED test_1::TestImage::test_save\n';
    expect(parseLogPytest(log)).toEqual({ 'TestImage.test_open': 'PASSED', 'TestImage.test_save': 'FAILED' });
  });

  it('keys as the reward compares them: decoloured, cut at " - ", sorted', () => {
    expect(normalizeStatusMap({ '\x1b[1mtest_a\x1b[0m': 'PASSED', 'test_p[x - y]': 'FAILED', 'test_b': 'ERROR' }))
      .toEqual({ test_a: 'PASSED', 'test_p[x': 'FAILED', test_b: 'ERROR' });
  });

  it('is_test_file and get_patch filters', () => {
    for (const p of ['tests/a.py', 'pkg/test/a.py', 'Tests/helper.py', 'test_x.py', 'pkg/test_x.py', 'pkg/x_test.py']) expect(isTestFile(p)).toBe(true);
    for (const p of ['pkg/a.py', 'testing/a.py', 'pkg/contest.py', 'latest.py']) expect(isTestFile(p)).toBe(false);
    const commit = ParsedCommitSchema.parse({
      old_commit_hash: 'a^', new_commit_hash: 'a',
      file_diffs: [
        { header: { file: { path: 'pkg/new.py' }, misc_line: 'new file mode 100644' }, index_line: { old_commit_hash: '0000000', new_commit_hash: '1111111', mode: '' },
          minus_file: { path: '/dev/null' }, plus_file: { path: 'b/pkg/new.py' },
          hunks: [{ descriptor: { old_range: { start: 0, length: 0 }, new_range: { start: 1, length: null }, section: '' },
            line_group: { all_lines: [{ content: 'x = 1', type: 'added' }, { content: 'No newline at end of file', type: 'note' }] } }] },
        { header: { file: { path: 'img.png' } }, is_binary_file: true, binary_line: 'Binary files a/img.png and b/img.png differ' },
        { header: { file: { path: 'tests/test_new.py' } }, hunks: [] },
      ],
    });
    expect(parsedCommitPatch(commit, { testFile: false })).toBe([
      'diff --git a/pkg/new.py b/pkg/new.py', 'new file mode 100644', 'index 0000000..1111111', '--- /dev/null', '+++ b/pkg/new.py',
      '@@ -0,0 +1 @@', '+x = 1', '\\ No newline at end of file', '',
    ].join('\n'));
    expect(parsedCommitPatch(commit, { onlyPython: false, testFile: false })).toContain('Binary files a/img.png and b/img.png differ\n');
    expect(parsedCommitPatch(commit, { nonTestFile: false })).toBe('diff --git a/tests/test_new.py b/tests/test_new.py\n');
    expect(parsedCommitPatch(commit, { excludeFiles: ['pkg/new.py'] })).toBe('diff --git a/tests/test_new.py b/tests/test_new.py\n');
  });
});
