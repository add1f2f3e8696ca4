/** Dataset layouts: how each published dataset names the image a row runs in, and what in that
 *  image the agent must not see. Pure rules, shared by the loader, the sandbox and the
 *  preflight. */

export const TASK_LAYOUTS = ['toy', 'swe-bench', 'swe-gym', 'swe-rebench', 'r2e-gym'] as const;
export type TaskLayout = (typeof TASK_LAYOUTS)[number];

/** The image a row runs in when the row does not name one itself.
 *  - SWE-bench / Verified: the harness's instance image, pushed under the `swebench` namespace
 *    (swebench 4.1.0 harness/test_spec/test_spec.py instance_image_key:
 *    `{namespace}/sweb.eval.{arch}.{instance_id.lower()}:{tag}` with "__" → "_1776_").
 *  - SWE-Gym: the same scheme under `xingyaoww`, with "__" → "_s_" (SWE-Gym's eval images).
 *  - SWE-rebench and R2E-Gym rows always name theirs (`docker_image`). */
export function publishedImage(layout: TaskLayout, instanceId: string): string | null {
  const id = instanceId.toLowerCase();
  if (layout === 'swe-bench') return `docker.io/swebench/sweb.eval.x86_64.${id.replace(/__/g, '_1776_')}:latest`;
  if (layout === 'swe-gym') return `docker.io/xingyaoww/sweb.eval.x86_64.${id.replace(/__/g, '_s_')}:latest`;
  return null;
}

/** Paths of a layout's image that hold hidden tests: covered by an empty root-only mount in the
 *  agent's sandbox (the grader's fresh container still sees them). */
export function hiddenImagePaths(layout: TaskLayout): string[] {
  return layout === 'r2e-gym' ? ['/r2e_tests'] : [];
}

/** Files of a layout's repository copy that belong to the grader, not the agent: R2E-Gym
 *  images keep run_tests.sh and a link to the hidden tests in /testbed (R2E-Gym's setup_env
 *  moves them out before the agent starts). They are removed from the agent's copy before the
 *  fresh commit, so no diff can change them. */
export function graderOnlyRepoFiles(layout: TaskLayout): string[] {
  return layout === 'r2e-gym' ? ['run_tests.sh', 'r2e_tests'] : [];
}

/** How to bring a missing image onto a host without registry access. */
export function imageLoadHint(image: string): string {
  const file = `${image.replace(/^docker\.io\//, '').replace(/[/:]/g, '_')}.tar`;
  return `on a machine with registry access: \`podman pull ${image} && podman save -o ${file} ${image}\`; then here: \`podman load -i ${file}\` (or \`docker load -i ${file}\`)`;
}
