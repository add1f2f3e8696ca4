/** The seccomp profile of every sandbox and grader container: the container engine's own
 *  default profile, with the creation of namespaces refused. podman's default allows
 *  `unshare`, `clone` with any flags, `clone3` and `setns` (rootless podman in a container
 *  needs them), so an unprivileged agent could `unshare -r` and be uid 0 in a user namespace
 *  of its own, with mounts and the rest of the kernel surface that opens. Docker's default
 *  refuses this to a container without CAP_SYS_ADMIN; this does the same:
 *  - `clone` and `unshare` only without any CLONE_NEW* flag (threads and forks are unchanged);
 *  - `clone3`, whose flags a filter cannot read, fails with ENOSYS, so the C library falls back
 *    to `clone` (as Docker's profile does);
 *  - `setns` fails with EPERM. */

export interface SeccompArg { index: number; value: number; valueTwo: number; op: string }
export interface SeccompRule { names: string[]; action: string; args?: SeccompArg[] | null; errnoRet?: number; comment?: string; [k: string]: unknown }
export interface SeccompProfile { defaultAction: string; syscalls: SeccompRule[]; [k: string]: unknown }

/** CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET */
export const CLONE_NEW_ANY = 0x7e020000;

const LOCKED = new Set(['clone', 'clone3', 'unshare', 'setns']);
const ENOSYS = 38;
const EPERM = 1;

export function withoutNewNamespaces(base: SeccompProfile): SeccompProfile {
  const syscalls = base.syscalls.flatMap((r) => {
    if (r.action !== 'SCMP_ACT_ALLOW' || !r.names.some((n) => LOCKED.has(n))) return [r];
    const names = r.names.filter((n) => !LOCKED.has(n));
    return names.length ? [{ ...r, names }] : [];
  });
  return {
    ...base,
    syscalls: [
      ...syscalls,
      { names: ['clone', 'unshare'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: CLONE_NEW_ANY, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }], comment: 'floe: no new namespaces (core/seccomp.ts)' },
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS, comment: 'floe: flags unreadable by a filter; the C library falls back to clone' },
      { names: ['setns'], action: 'SCMP_ACT_ERRNO', errnoRet: EPERM, comment: 'floe: no joining of namespaces' },
    ],
  };
}
