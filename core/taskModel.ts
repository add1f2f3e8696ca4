import { z } from 'zod';

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
  // floe's own fields (toy suite and data audit)
  floe: z.looseObject({
    bug_class: z.string().optional(),
    loose_tests: z.boolean().optional(),
    wrong_patch: z.string().optional(),
    solution: z.array(ToolCallSchema).optional(),
  }).optional(),
});

export type SweRow = z.infer<typeof SweRowSchema>;

export type TaskSource =
  | { kind: 'directory'; path: string } // a checked-out repository at its base (toy suite)
  | { kind: 'image'; image: string } // a prebuilt image with the repository at /testbed
  | { kind: 'git'; repo: string; commit: string }; // needs a local mirror of the repository

export interface Task {
  instanceId: string;
  dataset: string;
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
}

export class TaskRowError extends Error {
  constructor(public readonly where: string, public readonly field: string, reason: string) {
    super(`${where}: field ${field || '(row)'}: ${reason}`);
    this.name = 'TaskRowError';
  }
}

/** Validate and normalise one row. `where` names it in errors (e.g. "tasks.jsonl:12"). */
export function parseTaskRow(raw: unknown, where: string, dataset: string, directory?: string): Task {
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
  const image = row.docker_image ?? row.image_name;
  const source: TaskSource = directory
    ? { kind: 'directory', path: directory }
    : image
      ? { kind: 'image', image }
      : { kind: 'git', repo, commit: baseCommit };
  return {
    instanceId: row.instance_id,
    dataset,
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
  };
}
