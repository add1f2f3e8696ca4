import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { Message, ToolSchema } from '../core/harness.js';
import type { RenderSpec } from '../core/renderSpec.js';

/** Renderers: messages → token ids with the model's own tokenizer and chat template.
 *  Each (tokenizer, template) pair is served by one long-lived Python process
 *  (`python -m floe_engine.render_server`, engine/floe_engine/render.py) that uses the
 *  Hugging Face `tokenizers` library and a Jinja environment like transformers'
 *  `apply_chat_template`; this module is its client. The rule lives in Python only. */

/** Relative tokenizer and template paths of a RenderSpec are relative to the repository. */
export type { RenderSpec };

export interface TokenizerInfo {
  kind: 'byte' | 'hf';
  name: string;
  vocab_size: number;
  eos_token_id: number;
  eos_token: string | null;
  stop_token_ids: number[];
  pad_token_id: number;
  /** Control tokens a model turn must not contain (EOS excluded: it ends the turn). */
  special_token_ids: number[];
  special_token_texts: string[];
  template_sha256?: string;
}

export interface Rendered { ids: number[]; text: string }

export interface RenderPaths { python: string; home: string; repoRoot: string }

export function resolveTokenizer(spec: string, p: Pick<RenderPaths, 'home' | 'repoRoot'>): string {
  if (spec === '' || spec === 'byte') return 'byte';
  if (spec.startsWith('builtin:')) return path.join(p.home, 'tokenizers', spec.slice('builtin:'.length));
  if (spec.startsWith(MODEL_PREFIX)) return modelFolder(spec, p);
  return path.resolve(p.repoRoot, spec);
}

const MODEL_PREFIX = 'model:';
/** `model:NAME`: a checkpoint `floe models` built or imported, FLOE_HOME/models/NAME (its own tokenizer inside). */
function modelFolder(spec: string, p: Pick<RenderPaths, 'home'>): string {
  const name = spec.slice(MODEL_PREFIX.length);
  const folder = path.join(p.home, 'models', name);
  if (!fs.existsSync(path.join(folder, 'config.json'))) {
    throw new Error(`${spec}: no checkpoint at ${folder}; run \`floe models\` (builds the pinned ones) or \`floe models import FILE.gguf --name ${name}\``);
  }
  return folder;
}

/** A policy.model spec as the Python processes take it: `hf:model:NAME` becomes the folder's
 *  path (FLOE_HOME differs between machines and test setups, so configs name it, not the path). */
export function resolveModel(spec: string, p: Pick<RenderPaths, 'home'>): string {
  return spec.startsWith(`hf:${MODEL_PREFIX}`) ? `hf:${modelFolder(spec.slice(3), p)}` : spec;
}

/** The ref/unref of a child's pipe (a net.Socket; ChildProcess types it as a plain stream). */
const handle = (io: unknown) => (io ?? {}) as { ref?: () => void; unref?: () => void };

export class Renderer {
  private next = 1;
  private pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private stderr = '';

  private constructor(private readonly child: ChildProcess, readonly info: TokenizerInfo, readonly label: string) {
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let msg: { id?: number; ok?: boolean; result?: unknown; error?: string };
      try { msg = JSON.parse(line) as typeof msg; } catch { return; }
      const p = msg.id === undefined ? undefined : this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id!);
      if (this.pending.size === 0) handle(child.stdout).unref?.();
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new Error(`renderer ${label}: ${msg.error ?? 'unknown error'}`));
    });
    child.stderr!.on('data', (d: Buffer) => { this.stderr = (this.stderr + d.toString()).slice(-4000); });
    child.once('exit', (code) => {
      for (const p of this.pending.values()) p.reject(new Error(`renderer ${label} exited (${code}): ${this.stderr.trim().split('\n').slice(-3).join(' | ')}`));
      this.pending.clear();
    });
  }

  static start(spec: RenderSpec, p: RenderPaths): Promise<Renderer> {
    if (!fs.existsSync(p.python)) throw new Error(`the renderer needs ${p.python}; run \`floe up\` (it builds the engine environment)`);
    const tokenizer = resolveTokenizer(spec.tokenizer, p);
    if (tokenizer !== 'byte' && !fs.existsSync(tokenizer)) {
      throw new Error(`policy.tokenizer ${spec.tokenizer}: no folder at ${tokenizer}${spec.tokenizer.startsWith('builtin:') ? '; run `floe up` (it builds the built-in tokenizers)' : '; point it at a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json)'}`);
    }
    const args = ['-m', 'floe_engine.render_server', '--tokenizer', tokenizer];
    if (spec.chatTemplate) args.push('--chat-template', path.resolve(p.repoRoot, spec.chatTemplate));
    const child = spawn(p.python, args, { cwd: p.repoRoot, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, PYTHONUNBUFFERED: '1', OMP_NUM_THREADS: '1' } });
    const killOnExit = () => { child.kill('SIGKILL'); };
    process.once('exit', killOnExit);
    child.once('exit', () => process.removeListener('exit', killOnExit));
    // an idle renderer never keeps its parent alive (it lives as long as the worker that uses
    // it); while a request waits for its reply, its stdout does (Renderer.call)
    child.unref();
    for (const io of [child.stdin, child.stdout, child.stderr]) handle(io).unref?.();
    const label = `${spec.tokenizer}${spec.chatTemplate ? ` + ${spec.chatTemplate}` : ''}`;
    return new Promise((resolve, reject) => {
      let err = '';
      child.stderr!.on('data', (d: Buffer) => { err = (err + d.toString()).slice(-4000); });
      const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`renderer ${label} did not start within 60 s: ${err.trim()}`)); }, 60_000);
      const onExit = (code: number | null) => { clearTimeout(timer); reject(new Error(`renderer ${label} failed to start (exit ${code}): ${err.trim().split('\n').slice(-4).join(' | ')}`)); };
      child.once('exit', onExit);
      const rl = readline.createInterface({ input: child.stdout! });
      rl.once('line', (line) => {
        clearTimeout(timer);
        child.removeListener('exit', onExit);
        rl.close();
        try {
          const ready = JSON.parse(line) as { event: string; info: TokenizerInfo };
          if (ready.event !== 'ready') throw new Error(line);
          resolve(new Renderer(child, ready.info, label));
        } catch (e) {
          child.kill('SIGKILL');
          reject(new Error(`renderer ${label} said ${line.slice(0, 200)} instead of ready (${(e as Error).message})`));
        }
      });
    });
  }

  private call<T>(op: string, args: Record<string, unknown>): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      if (this.child.exitCode !== null || !this.child.stdin!.writable) return reject(new Error(`renderer ${this.label} is not running`));
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      handle(this.child.stdout).ref?.();
      this.child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    });
  }

  /** Turn 0: the conversation rendered with the assistant header, as ids. */
  start(messages: Message[], tools: ToolSchema[]): Promise<Rendered> { return this.call('start', { messages, tools }); }
  /** The ids after the last completion's EOS up to the next assistant header (messages end with the tool result). */
  continuation(messages: Message[], tools: ToolSchema[]): Promise<Rendered> { return this.call('continuation', { messages, tools }); }
  /** The whole conversation as the template renders it (to record drift from the concatenation). */
  full(messages: Message[], tools: ToolSchema[]): Promise<Rendered> { return this.call('full', { messages, tools }); }
  /** A reply as the model would produce it: its ids and the end-of-turn token. */
  assistantIds(text: string): Promise<number[]> { return this.call('assistant_ids', { text }); }
  decode(ids: readonly number[]): Promise<string> { return this.call('decode', { ids }); }

  get alive(): boolean { return this.child.exitCode === null && this.child.signalCode === null; }

  close(): void { this.child.stdin!.end(); }
}

/** One renderer process per (tokenizer, template), started on first use. */
export class Renderers {
  private live = new Map<string, Promise<Renderer>>();
  constructor(private readonly paths: RenderPaths) {}

  async get(spec: RenderSpec): Promise<Renderer> {
    const key = `${spec.tokenizer}\u0000${spec.chatTemplate}`;
    let r = this.live.get(key);
    if (r && !(await r.catch(() => null))?.alive) r = undefined; // died: start a new one
    if (!r) {
      r = Renderer.start(spec, this.paths);
      r.catch(() => this.live.delete(key)); // a failed start is retried by the next call
      this.live.set(key, r);
    }
    return r;
  }

  async closeAll(): Promise<void> {
    const all = [...this.live.values()];
    this.live.clear();
    for (const r of all) (await r.catch(() => null))?.close();
  }
}
