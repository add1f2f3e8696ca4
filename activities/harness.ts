import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import type { TestGroup, TestOutcome } from '../core/sandboxPolicy.js';

/** The bridge to floe_harness (harness/): the datasets' own evaluation rules, in Python, where
 *  the official swebench package lives. `HarnessServer`: one long-lived `python -m floe_harness serve` per
 *  Python, shared by the worker's gradings (interpreter start and imports paid once), requests
 *  tagged with ids, restarted when it dies; plans are cached per request (a plan depends only
 *  on the task, the base commit and the paths). */

export interface HarnessPlan {
  /** 'swebench', 'r2e-gym' or 'pytest'. */
  harness: string;
  /** The bash script the grader runs in the task's container (as the agent). */
  script: string;
  /** The log parser that reads the script's output (the harness's name for it). */
  parser: string;
  testCommand: string;
}

export interface HarnessVerdict {
  /** Every test the parser saw, with its status as the harness names it (PASSED, FAILED, …). */
  statuses: Record<string, string>;
  tests: { id: string; group: TestGroup; outcome: TestOutcome }[];
  resolved: boolean;
  /** The log reached the harness's end marker (false: killed, timed out, or cut). */
  logComplete: boolean;
}

/** A candidate wrong patch: its kind (hunk_subset, symbol_only, mutation; format_spec, call_site,
 *  branch_drop, off_by_one: floe_harness/audit/agent_mistakes.py), what it changes, and
 *  its diff against the base. */
export interface AuditCandidate { id: string; kind: string; description: string; path: string; diff: string }

/** The ref/unref of a child's pipe (a net.Socket; ChildProcess types it as a plain stream). */
const ioOf = (io: unknown) => (io ?? {}) as { ref?: () => void; unref?: () => void };

type Pending = { resolve(v: unknown): void; reject(e: Error): void; cmd: string };

export class HarnessServer {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly plans = new Map<string, Promise<HarnessPlan>>();

  constructor(private readonly python: string) {}

  private static readonly shared = new Map<string, HarnessServer>();
  /** The process-wide server of a Python (every grading of the worker shares it). */
  static for(python: string): HarnessServer {
    let s = HarnessServer.shared.get(python);
    if (!s) HarnessServer.shared.set(python, (s = new HarnessServer(python)));
    return s;
  }

  plan(req: { task: Task & { runTestsSh?: string }; baseCommit: string; repoDir: string; stageDir: string }): Promise<HarnessPlan> {
    const key = crypto.createHash('sha256').update(JSON.stringify(req)).digest('hex');
    let p = this.plans.get(key);
    if (!p) {
      p = this.call<HarnessPlan>('plan', req);
      if (this.plans.size > 4096) this.plans.clear();
      this.plans.set(key, p);
      p.catch(() => this.plans.delete(key));
    }
    return p;
  }

  parse(req: { task: Task; harness: string; log: string }): Promise<HarnessVerdict> {
    return this.call<HarnessVerdict>('parse', req);
  }

  /** The data audit's plausible wrong patches for a gold patch (floe_harness/audit/candidates.py). */
  candidates(req: { files: Record<string, { base: string | null; gold: string }>; limit: number }): Promise<{ candidates: AuditCandidate[]; seeds: unknown[]; changed: Record<string, string[]>; siblings?: Record<string, string[][]> }> {
    return this.call<{ candidates: AuditCandidate[]; seeds: unknown[]; changed: Record<string, string[]>; siblings?: Record<string, string[][]> }>('candidates', req);
  }

  /** Stronger tests from the gold patch's behaviour (floe_harness/audit/strengthen.py). */
  strengthen(req: { gold1: unknown; gold2: unknown; testPatch: string; first: string[] }): Promise<{ testPatch: string | null; tests?: string[]; checks?: number; reason?: string }> {
    return this.call('strengthen', req);
  }

  /** Stop the process (a later call starts a new one). */
  close(): void {
    this.child?.stdin.end();
    this.child = null;
  }

  private start(): ChildProcessWithoutNullStreams {
    if (!fs.existsSync(this.python)) {
      throw ApplicationFailure.nonRetryable(`the grading harness environment is missing (${this.python}); run \`floe up\` (harness/setup.sh installs the swebench package there)`, 'HarnessMissing');
    }
    const child = spawn(this.python, ['-m', 'floe_harness', 'serve'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let buf = '';
    let err = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let msg: { id: number; ok: boolean; out?: unknown; error?: string };
        try { msg = JSON.parse(line) as typeof msg; } catch { continue; }
        const p = this.pending.get(msg.id);
        if (!p) continue;
        this.pending.delete(msg.id);
        this.holdLoop(child);
        if (msg.ok) p.resolve(msg.out);
        else p.reject(ApplicationFailure.nonRetryable(`floe_harness ${p.cmd} failed: ${msg.error ?? '?'}`, 'HarnessFailed'));
      }
    });
    child.stderr.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-4000); });
    const gone = (why: string) => {
      if (this.child === child) this.child = null;
      ioOf(child.stdout).unref?.();
      // requests in flight fail (retryable: the activity's retry gets a new process)
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.reject(new Error(`floe_harness serve ended (${why}) during ${p.cmd}: ${err.trim().split('\n').slice(-3).join(' | ')}`));
      }
    };
    child.on('error', (e) => gone(`did not start: ${e.message}`));
    child.on('close', (code, signal) => gone(`exit ${code ?? signal}`));
    child.stdin.on('error', () => undefined);
    // the worker may exit while the server idles; while a request waits for its reply, the
    // server's stdout keeps the event loop alive (holdLoop), or a plain script that awaits a
    // grading would see Node's loop empty mid-call and exit 13 with nothing printed
    child.unref();
    for (const io of [child.stdin, child.stdout, child.stderr]) ioOf(io).unref?.();
    this.child = child;
    return child;
  }

  /** Ref the server's stdout while a request is pending, unref it when none is. */
  private holdLoop(child: ChildProcessWithoutNullStreams): void {
    if (this.pending.size > 0) ioOf(child.stdout).ref?.();
    else ioOf(child.stdout).unref?.();
  }

  private call<T>(cmd: 'plan' | 'parse' | 'candidates' | 'strengthen', req: unknown): Promise<T> {
    const child = this.child ?? this.start();
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, cmd });
      this.holdLoop(child);
      child.stdin.write(`${JSON.stringify({ id, cmd, req })}\n`);
    });
  }
}
