import { z } from 'zod';
import { publishedImage, type TaskLayout } from './taskLayouts.js';
import { parseR2eRow, R2eRowError } from './r2eRow.js';

/** The task model: one SWE task as floe runs it, parsed from SWE-bench / SWE-bench Verified
 *  rows and the SWE-Gym, R2E-Gym and SWE-rebench variants, plus floe's toy suite. */

/** FAIL_TO_PASS / PASS_TO_PASS arrive as arrays or as JSON-encoded strings of arrays. */
const testList = z.preprocess((v) => {
  if (typeof v !== 'string') return v;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return v; // fails the array check below, with its message
  }
}, z.array(z.string(), { error: 'must be a JSON array of test ids (or an array)' }));

const ToolCallSchema = z.strictObject({ name: z.string(), arguments: z.record(z.string(), z.unknown()) });

/** A row as the public datasets publish it. Unknown extra columns are allowed and ignored. */
export const SweRowSchema = z.looseObject({
  instance_id: z.string().min(1),
  repo: z.string().min(1).optional(),
  repo_name: z.string().min(1).optional(), // R2E-Gym
  base_commit: z.string().optional(),
  commit_hash: z.string().optional(), // R2E-Gym
  patch: z.string().optional(),
  test_patch: z.string().optional(),
  problem_statement: z.string().min(1),
  FAIL_TO_PASS: testList.optional(),
  PASS_TO_PASS: testList.optional(),
  version: z.union([z.string(), z.number()]).transform(String).optional(),
  environment_setup_commit: z.string().optional(),
  hints_text: z.string().optional(),
  created_at: z.string().optional(),
  // where the task runs: SWE-rebench / R2E-Gym ship a prebuilt image per task
  docker_image: z.string().optional(),
  image_name: z.string().optional(),
  // SWE-rebench: its own install/test recipe per row (floe grades such rows by the swebench
  // tables when they cover the repository, else by its pytest runner)
  install_config: z.unknown().optional(),
  // R2E-Gym: expected per-test outcomes of the fixed repository
  expected_output_json: z.unknown().optional(),
  // floe's own fields (toy suite and data audit)
  floe: z.lazy(() => FloeFieldsSchema).optional(),
});

/** floe's own fields of a row, in any layout: the toy suite's and the data audit's. */
const FloeFieldsSchema = z.looseObject({
  bug_class: z.string().optional(),
  loose_tests: z.boolean().optional(),
  wrong_patch: z.string().optional(),
  solution: z.array(ToolCallSchema).optional(),
});

export type SweRow = z.infer<typeof SweRowSchema>;

export type TaskSource =
  | { kind: 'directory'; path: string } // a checked-out repository at its base (toy suite)
  | { kind: 'image'; image: string }; // a prebuilt image with the repository at /testbed

export interface Task {
  instanceId: string;
  dataset: string;
  /** Which published layout the row follows: names its image and picks its harness. */
  layout: TaskLayout;
  repo: string;
  baseCommit: string;
  problemStatement: string;
  hintsText: string;
  patch: string;
  testPatch: string;
  failToPass: string[];
  passToPass: string[];
  version: string;
  environmentSetupCommit: string;
  source: TaskSource;
  looseTests: boolean | null;
  wrongPatch: string | null;
  solution: { name: string; arguments: Record<string, unknown> }[] | null;
  /** R2E-Gym rows: the fixed repository's outcome per test (expected_output_json). */
  expectedOutputs: Record<string, string> | null;
}

/** The layout of a row when the pool does not say: R2E-Gym rows carry expected outputs,
 *  SWE-rebench rows an install_config with their image; the rest read as SWE-bench. SWE-Gym
 *  rows look exactly like SWE-bench's: name them with `tasks.layout: swe-gym`. */
export function detectLayout(row: SweRow): TaskLayout {
  if (row.expected_output_json !== undefined) return 'r2e-gym';
  if (row.install_config !== undefined && row.docker_image) return 'swe-rebench';
  return 'swe-bench';
}

export class TaskRowError extends Error {
  constructor(public readonly where: string, public readonly field: string, reason: string) {
    super(`${where}: field ${field || '(row)'}: ${reason}`);
    this.name = 'TaskRowError';
  }
}

/** Validate and normalise one row. `where` names it in errors (e.g. "tasks.jsonl:12"). A
 *  directory makes it a toy task (its repository is that folder). */
export function parseTaskRow(raw: unknown, where: string, dataset: string, directory?: string, layoutOf: TaskLayout | 'auto' = 'auto'): Task {
  const r2e = layoutOf === 'r2e-gym' || (layoutOf === 'auto' && typeof raw === 'object' && raw !== null && 'expected_output_json' in raw);
  if (r2e && !directory) return parseR2eTask(raw, where, dataset);
  const r = SweRowSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new TaskRowError(where, i.path.map(String).join('.'), i.message);
  }
  const row = r.data;
  const repo = row.repo ?? row.repo_name;
  if (!repo) throw new TaskRowError(where, 'repo', 'missing (repo, or repo_name for R2E-Gym rows)');
  const baseCommit = row.base_commit ?? row.commit_hash;
  if (!baseCommit) throw new TaskRowError(where, 'base_commit', 'missing (base_commit, or commit_hash for R2E-Gym rows)');
  if (!row.FAIL_TO_PASS || row.FAIL_TO_PASS.length === 0) throw new TaskRowError(where, 'FAIL_TO_PASS', 'missing or empty: a task needs at least one test that the fix makes pass');
  if (row.test_patch === undefined) throw new TaskRowError(where, 'test_patch', 'missing');
  const layout: TaskLayout = directory ? 'toy' : layoutOf === 'auto' ? detectLayout(row) : layoutOf;
  let source: TaskSource;
  if (directory) source = { kind: 'directory', path: directory };
  else {
    const image = row.docker_image ?? row.image_name ?? publishedImage(layout, row.instance_id);
    if (!image) throw new TaskRowError(where, 'docker_image', `missing: ${layout} rows name their image (docker_image)`);
    source = { kind: 'image', image };
  }
  return {
    instanceId: row.instance_id,
    dataset,
    layout,
    repo,
    baseCommit,
    problemStatement: row.problem_statement,
    hintsText: row.hints_text ?? '',
    patch: row.patch ?? '',
    testPatch: row.test_patch,
    failToPass: row.FAIL_TO_PASS,
    passToPass: row.PASS_TO_PASS ?? [],
    version: row.version ?? '',
    environmentSetupCommit: row.environment_setup_commit ?? '',
    source,
    looseTests: row.floe?.loose_tests ?? null,
    wrongPatch: row.floe?.wrong_patch ?? null,
    solution: row.floe?.solution ?? null,
    expectedOutputs: null,
  };
}

/** An R2E-Gym row as published (no instance id, no test patch: core/r2eRow.ts reads it). */
function parseR2eTask(raw: unknown, where: string, dataset: string): Task {
  let f;
  try {
    f = parseR2eRow(raw);
  } catch (err) {
    if (err instanceof R2eRowError) throw new TaskRowError(where, err.field, err.message.replace(/^R2E-Gym row: field \S+: /, ''));
    throw err;
  }
  const own = FloeFieldsSchema.safeParse((raw as { floe?: unknown }).floe ?? {});
  if (!own.success) throw new TaskRowError(where, `floe.${own.error.issues[0].path.join('.')}`, own.error.issues[0].message);
  return {
    instanceId: f.instanceId,
    dataset,
    layout: 'r2e-gym',
    repo: f.repo,
    baseCommit: f.baseCommit,
    problemStatement: f.problemStatement,
    hintsText: '',
    patch: f.patch,
    testPatch: f.testPatch,
    failToPass: f.failToPass,
    passToPass: f.passToPass,
    version: '',
    environmentSetupCommit: '',
    source: { kind: 'image', image: f.image },
    looseTests: own.data.loose_tests ?? null,
    wrongPatch: own.data.wrong_patch ?? null,
    solution: own.data.solution ?? null,
    expectedOutputs: f.expectedOutputs,
  };
}
