import { z } from 'zod';

/** R2E-Gym rows (R2E-Gym-Lite, R2E-Gym-Subset, R2E-Gym-Full) as the datasets publish them, read
 *  into what floe's Task needs. Pure: no Node APIs.
 *
 *  A row (src/r2egym/repo_analysis/validate_docker_and_hf.py DatasetRow in R2E-Gym) has
 *  repo_name, docker_image (`namanjain12/<repo>_final:<commit_hash>`), commit_hash (the fix),
 *  parsed_commit_content (ParsedCommit.model_dump_json: the fix commit, diff by diff, hunk by
 *  hunk), execution_result_content (ExecutionResult.model_dump_json: the hidden tests run at the
 *  fix and at its parent), expected_output_json (the fix's test statuses, the reward's answer
 *  key), problem_statement ("[ISSUE] … [/ISSUE]"), prompt, modified_files,
 *  modified_entity_summaries, relevant_files and num_non_test_{files,func_methods,lines}.
 *  There is no instance id, no test patch and no FAIL_TO_PASS: the tests are in the image
 *  (/r2e_tests) and the reward compares every test's status with expected_output_json. */

export interface R2eTaskFields {
  /** R2E-Gym keys a task by `<repo_name>_<commit_hash>` (repo_testextract.py's directory). */
  instanceId: string;
  repo: string;
  /** The image's HEAD: parsed_commit_content.old_commit_hash, in R2E-Gym's rows the revision
   *  expression `<commit_hash>^` (store_repo_commits.process_commit), not a commit id. */
  baseCommit: string;
  /** What the agent is given: the text inside [ISSUE] … [/ISSUE] (DockerRuntime.get_task_instruction). */
  problemStatement: string;
  /** The gold patch as R2E-Gym derives it (trajectory.py gt_patch):
   *  ParsedCommit.get_patch(test_file=False): the commit's Python files that are not test files. */
  patch: string;
  /** '' : the hidden tests are in the image at /r2e_tests; R2E-Gym applies no test patch. */
  testPatch: string;
  /** The commit's full Python patch, tests included (ParsedCommit.get_patch()), which is what
   *  R2E-Gym's own validation (validate_docker_and_hf.validate_docker) applies to get reward 1. */
  goldPatchWithTests: string;
  /** Expected tests (names as the reward compares them) whose status at base differs from the
   *  expected one; [] when the row has no execution_result_content to tell. */
  failToPass: string[];
  /** The other expected tests: same status at base and at the fix (PASSED, or FAILED/ERROR
   *  that must stay so). */
  passToPass: string[];
  /** expected_output_json as published: test name -> PASSED | FAILED | ERROR. */
  expectedOutputs: Record<string, string>;
  /** docker_image as published (a Docker-style short name: docker.io/namanjain12/…). */
  image: string;
}

export class R2eRowError extends Error {
  constructor(public readonly field: string, reason: string) {
    super(`R2E-Gym row: field ${field || '(row)'}: ${reason}`);
    this.name = 'R2eRowError';
  }
}

// ------------------------------------------------------------------ R2E-Gym's models (subset)

const nullish = <T extends z.ZodType>(t: T) => t.nullable().optional();
const FileInfo = z.looseObject({ path: z.string() });
const Range = z.looseObject({ start: z.number().int(), length: nullish(z.number().int()) });
const Line = z.looseObject({ content: z.string(), type: z.enum(['context', 'added', 'deleted', 'note']) });
const Hunk = z.looseObject({
  descriptor: z.looseObject({ old_range: Range, new_range: Range, section: z.string() }),
  line_group: z.looseObject({ all_lines: z.array(Line).default([]) }),
});
const FileDiff = z.looseObject({
  header: z.looseObject({ file: FileInfo, misc_line: nullish(z.string()) }),
  index_line: nullish(z.looseObject({ old_commit_hash: z.string(), new_commit_hash: z.string(), mode: z.string() })),
  is_binary_file: z.boolean().default(false),
  binary_line: nullish(z.string()),
  minus_file: nullish(FileInfo),
  plus_file: nullish(FileInfo),
  hunks: z.array(Hunk).default([]),
});
/** commit_models/diff_classes.py ParsedCommit, the parts that make its patch. */
export const ParsedCommitSchema = z.looseObject({
  file_diffs: z.array(FileDiff),
  old_commit_hash: z.string().min(1),
  new_commit_hash: z.string().min(1),
  commit_message: z.string().optional(),
});
export type ParsedCommit = z.infer<typeof ParsedCommitSchema>;
type FileDiffT = z.infer<typeof FileDiff>;

/** FileDiff.is_test_file (the one ParsedCommit.get_patch uses). */
export function isTestFile(filePath: string): boolean {
  const parts = filePath.split('/');
  return filePath.endsWith('_test.py') || filePath.startsWith('test_') || (parts[parts.length - 1] ?? '').startsWith('test_')
    || parts.includes('tests') || parts.includes('Tests') || parts.includes('test') || parts.includes('Test');
}

function rangeText(r: { start: number; length?: number | null }): string {
  return r.length === null || r.length === undefined ? `${r.start}` : `${r.start},${r.length}`;
}

/** FileDiff.get_patch. */
export function fileDiffPatch(fd: FileDiffT, where = 'file_diffs'): string {
  const p = fd.header.file.path;
  let patch = `diff --git a/${p} b/${p}\n`;
  if (fd.header.misc_line) patch += `${fd.header.misc_line}\n`;
  if (fd.index_line) patch += `index ${fd.index_line.old_commit_hash}..${fd.index_line.new_commit_hash}${fd.index_line.mode ? ' ' : ''}${fd.index_line.mode}\n`;
  if (fd.is_binary_file) {
    if (typeof fd.binary_line !== 'string') throw new R2eRowError(`${where}.binary_line`, 'a binary file diff without its "Binary files … differ" line');
    patch += `${fd.binary_line}\n`;
  }
  if (fd.minus_file && fd.plus_file) patch += `--- ${fd.minus_file.path}\n+++ ${fd.plus_file.path}\n`;
  for (const h of fd.hunks) {
    const d = h.descriptor;
    patch += `@@ -${rangeText(d.old_range)} +${rangeText(d.new_range)} @@${d.section ? ` ${d.section}` : ''}\n`;
    for (const line of h.line_group.all_lines) {
      if (line.type === 'context') patch += ` ${line.content}\n`;
      else if (line.type === 'added') patch += `+${line.content}\n`;
      else if (line.type === 'deleted') patch += `-${line.content}\n`;
      else patch += `\\ ${line.content}\n`;
    }
  }
  return patch;
}

export interface GetPatchOptions { testFile?: boolean; nonTestFile?: boolean; includeFiles?: string[]; excludeFiles?: string[]; onlyPython?: boolean }

/** ParsedCommit.get_patch(test_file=True, non_test_file=True, include_files=None,
 *  exclude_files=[], only_python=True). */
export function parsedCommitPatch(commit: ParsedCommit, opts: GetPatchOptions = {}): string {
  const { testFile = true, nonTestFile = true, includeFiles, excludeFiles = [], onlyPython = true } = opts;
  let patch = '';
  commit.file_diffs.forEach((fd, i) => {
    const p = fd.header.file.path;
    if (excludeFiles.includes(p)) return;
    if (includeFiles && includeFiles.length > 0 && !includeFiles.includes(p)) return;
    if (onlyPython && !p.endsWith('.py')) return;
    const test = isTestFile(p);
    if ((test && testFile) || (!test && nonTestFile)) patch += fileDiffPatch(fd, `parsed_commit_content.file_diffs.${i}`);
  });
  return patch;
}

// ------------------------------------------------------------------- R2E-Gym's log reading

const SUMMARY = 'short test summary info';

/** repo_analysis/execution_log_parser.py parse_log_pytest (R2E-Gym's parser for all of its
 *  repositories): test name -> PASSED | FAILED | ERROR, from the lines after "short test
 *  summary info" only; the name drops the file (`a.py::C::t` -> `C.t`). */
export function parseLogPytest(log: string | null | undefined): Record<string, string> {
  const map = new Map<string, string>();
  if (log === null || log === undefined || !log.includes(SUMMARY)) return {};
  for (const line of log.split(SUMMARY)[1].trim().split('\n')) {
    const name = line.split('::').slice(1).join('.');
    if (line.includes('PASSED')) map.set(name, 'PASSED');
    else if (line.includes('FAILED')) map.set(name.split(' - ')[0], 'FAILED');
    else if (line.includes('ERROR')) map.set(name.split(' - ')[0], 'ERROR');
  }
  return Object.fromEntries(map);
}

/** The keys _calculate_reward_r2e compares: decolor_dict_keys (`\x1b[<n>m` removed), then cut at
 *  " - ", in sorted key order (a later key wins). */
export function normalizeStatusMap(m: Record<string, string>): Record<string, string> {
  const decolored = new Map<string, string>();
  for (const [k, v] of Object.entries(m)) decolored.set(k.replace(/\x1b\[\d+m/g, ''), v);
  const out = new Map<string, string>();
  for (const k of [...decolored.keys()].sort()) out.set(k.split(' - ')[0], decolored.get(k) as string);
  return Object.fromEntries(out);
}

// ------------------------------------------------------------------------------------ rows

const RowSchema = z.looseObject({
  repo_name: z.string().min(1),
  docker_image: z.string().min(1),
  commit_hash: z.string().min(1),
  problem_statement: z.string().min(1),
  parsed_commit_content: z.string().min(1),
  expected_output_json: z.string().min(1),
  execution_result_content: nullish(z.string()),
});

function jsonField(field: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new R2eRowError(field, `not JSON (${(err as Error).message})`);
  }
}

function firstIssue(field: string, e: z.ZodError): R2eRowError {
  const i = e.issues[0];
  return new R2eRowError([field, ...i.path.map(String)].filter((s) => s !== '').join('.'), i.message);
}

/** Read one published R2E-Gym row; throws R2eRowError naming the field on bad input. */
export function parseR2eRow(raw: unknown): R2eTaskFields {
  const r = RowSchema.safeParse(raw);
  if (!r.success) throw firstIssue('', r.error);
  const row = r.data;

  const pc = ParsedCommitSchema.safeParse(jsonField('parsed_commit_content', row.parsed_commit_content));
  if (!pc.success) throw firstIssue('parsed_commit_content', pc.error);
  const commit = pc.data;
  if (commit.new_commit_hash !== row.commit_hash) {
    throw new R2eRowError('parsed_commit_content.new_commit_hash', `${commit.new_commit_hash} is not the row's commit_hash ${row.commit_hash}`);
  }

  const ex = z.record(z.string(), z.string(), { error: 'must be a JSON object of test name to status string' })
    .safeParse(jsonField('expected_output_json', row.expected_output_json));
  if (!ex.success) throw firstIssue('expected_output_json', ex.error);
  const expectedOutputs = ex.data;
  const expected = normalizeStatusMap(expectedOutputs);
  if (Object.keys(expected).length === 0) throw new R2eRowError('expected_output_json', 'no tests: R2E-Gym would reward any run whose log has no test summary');

  let atBase: Map<string, string> | null = null;
  if (typeof row.execution_result_content === 'string' && row.execution_result_content !== '') {
    const er = z.looseObject({ old_commit_res_stdout: nullish(z.string()) })
      .safeParse(jsonField('execution_result_content', row.execution_result_content));
    if (!er.success) throw firstIssue('execution_result_content', er.error);
    if (typeof er.data.old_commit_res_stdout === 'string') atBase = new Map(Object.entries(normalizeStatusMap(parseLogPytest(er.data.old_commit_res_stdout))));
  }
  const names = Object.keys(expected);
  const base = atBase;
  const failToPass = base ? names.filter((n) => base.get(n) !== expected[n]) : [];
  const passToPass = names.filter((n) => !failToPass.includes(n));

  const issue = /\[ISSUE\]([\s\S]*)\[\/ISSUE\]/.exec(row.problem_statement);
  return {
    instanceId: `${row.repo_name}_${row.commit_hash}`,
    repo: row.repo_name,
    baseCommit: commit.old_commit_hash,
    problemStatement: issue ? issue[1] : row.problem_statement,
    patch: parsedCommitPatch(commit, { testFile: false }),
    testPatch: '',
    goldPatchWithTests: parsedCommitPatch(commit),
    failToPass,
    passToPass,
    expectedOutputs,
    image: row.docker_image,
  };
}
