#!/usr/bin/env -S npx tsx
import fs from 'node:fs';
import path from 'node:path';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { doctor, down, up } from '../infra/up.js';
import { ROLES, runWorkers, type Role } from '../workers/worker.js';
import { temporalClient } from '../workers/connect.js';
import { getRunStatus, listRuns, pause, resume, startRun, stop, webUiLink, runWorkflowId } from '../client/runs.js';
import { flag, parseArgs, UsageError } from './args.js';
import { loadRunConfig } from './config.js';
import { ConfigError, RunConfigSchema, parseRunConfig } from '../core/config.js';
import { hostsItself } from '../core/runHosting.js';
import { CONFIG_DOC_FILE, renderConfigDoc } from '../core/configDoc.js';
import { runDemo } from './demo.js';
import { writeReport } from '../report/write.js';
import { dbPool, closeDbPool } from '../store/pool.js';
import type { EngineKind } from '../activities/engines/adapter.js';
import type { TaskLayout } from '../core/taskLayouts.js';

const USAGE = `floe — durable asynchronous RL for software-engineering agents

usage:
  floe up [--only a,b] [--test]                           install and start what is missing
                                                          (temporal, postgres, podman, image, python;
                                                          --test adds the browser the UI tests drive)
  floe down                                               stop what floe up started
  floe doctor [--json]                                    state of each component, and fixes
  floe worker <control|sandbox|gpu|all> [--node NAME]     run a worker (all roles: embedded default)
  floe run start [CONFIG.yaml] [--set key.path=value]…    start a training run (a config listing no servers:
                                                          hosted here on embedded ones, as floe demo does)
  floe run list                                           runs known to Temporal
  floe run status <run-id> [--json]
  floe run pause|resume|stop <run-id>
  floe demo [CONFIG.yaml] [--set key.path=value]…         the main job: the stress test (configs/stress-test.yaml)
  floe stress [CONFIG.yaml] [--layers naive,gate,raw,full] [--set key.path=value]…
                                                          the recipe ablation: one demo run per layer, same pool,
                                                          seed and budget; one report with the layers side by side
  floe eval <run-id|checkpoint-dir>… --tasks LIST… [--k 4] [--config CONFIG.yaml] [--set key.path=value]…
            [--source rows.jsonl|toy] [--seed N] [--out FILE.json]
                                                          frozen-weight pass@1 / pass@k, one column per policy
                                                          (a run id: its start and final checkpoints); LIST: a file
                                                          (one task id per line, or a JSON array), toy, pool:RUN_ID
                                                          or heldout:RUN_ID; --tasks again adds a list
  floe report <run-id> [--out DIR]                        static HTML report + summary.json of a run
  floe view [run-id] [--port N] [--export ROLLOUT_ID --out FILE]
                                                          the rollout viewer on 127.0.0.1 (read-only on Postgres):
                                                          each token's weight version, gate refusals, test outcomes;
                                                          --export writes one rollout as a single offline HTML file
  floe models                                             build the pinned checkpoints once (cached by content):
                                                          model:smollm2-135m-instruct from its GGUF (sha256 checked)
  floe models import FILE.gguf [--name NAME] [--sha256 HEX]
                                                          convert any GGUF file to FLOE_HOME/models/NAME (model:NAME)
  floe config docs [--write]                              the run config reference: every field's type, default
                                                          and meaning, from its schema (core/config.ts); --write
                                                          writes ${CONFIG_DOC_FILE}
  floe config defaults                                    every field's default, as JSON
  floe engine probe <url> [--kind reference|vllm|sglang] [--json]
                                                          check each capability floe needs of a running
                                                          inference server, with the flag that fixes it
  floe tasks check <rows.jsonl|toy> [--layout L] [--pull] [--json]
                                                          a pool before a run: bad rows, each row's layout
                                                          and image, and which images are missing here
  floe audit <rows.jsonl|toy|real> [--tasks a,b] [--limit N] [--concurrency 2] [--max-candidates 200] [--layout L]
             [--auditor RUN_CONFIG [--auditor-attempts 2]]
                                                          the data audit: standard validation and a search for
                                                          wrong patches the tests accept; resumable (run it again);
                                                          --auditor adds an agent on the config's engines.endpoints`;

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  // the reference is the schema alone: it needs no settings (no Postgres, no Temporal)
  if (cmd === 'config') return configCommand(rest);
  const s = loadSettings();
  switch (cmd) {
    case 'up': {
      const p = parseArgs(rest, { only: 'value', test: 'bool' });
      await up(s, { only: flag(p, 'only')?.split(','), test: flag(p, 'test') === 'true' });
      return 0;
    }
    case 'down':
      await down(s);
      return 0;
    case 'doctor': {
      const p = parseArgs(rest, { json: 'bool' });
      const report = await doctor(s);
      if (flag(p, 'json')) console.log(JSON.stringify(report, null, 2));
      else for (const { name, health } of report) console.log(`${health.ok ? 'ok  ' : 'FAIL'} ${name.padEnd(9)} ${health.detail}${health.fix ? `\n     → ${health.fix}` : ''}`);
      return report.every((r) => r.health.ok) ? 0 : 1;
    }
    case 'worker': {
      const p = parseArgs(rest, { node: 'value' });
      const role = p.positional[0];
      if (role !== 'all' && !ROLES.includes(role as Role)) throw new UsageError(`unknown worker role '${role ?? ''}' (control, sandbox, gpu or all)`);
      await runWorkers(s, role === 'all' ? ROLES : [role as Role], flag(p, 'node') ?? 'local');
      return 0;
    }
    case 'run':
      return runCommand(rest);
    case 'demo': {
      const p = parseArgs(rest, { set: 'multi' });
      const config = loadRunConfig(p.positional[0] ?? path.join(repoRoot, 'configs', 'stress-test.yaml'), p.flags.get('set') ?? []);
      await up(s);
      return (await runDemo(s, config)).ok ? 0 : 1;
    }
    case 'stress': {
      const p = parseArgs(rest, { set: 'multi', layers: 'value' });
      const { layersFlag, runStress } = await import('./stress.js');
      const layers = layersFlag(flag(p, 'layers'));
      const file = p.positional[0] ?? path.join(repoRoot, 'configs', 'stress-test.yaml');
      const sets = p.flags.get('set') ?? [];
      const base = loadRunConfig(file, sets);
      await up(s);
      return runStress(s, { base, configFile: file, sets, layers, command: ['floe', ...argv].join(' ') });
    }
    case 'eval': {
      const p = parseArgs(rest, { tasks: 'multi', k: 'value', config: 'value', set: 'multi', source: 'value', seed: 'value', out: 'value' });
      const int = (name: string, v: string | undefined, d: number | undefined) => {
        if (v === undefined) return d;
        const n = Number(v);
        if (!/^-?\d+$/.test(v.trim()) || !Number.isSafeInteger(n)) throw new UsageError(`--${name} must be a whole number (got '${v}')`);
        return n;
      };
      const { runEval } = await import('./eval.js');
      const opts = {
        policies: p.positional, tasks: p.flags.get('tasks') ?? [], k: int('k', flag(p, 'k'), 4)!, config: flag(p, 'config'), sets: p.flags.get('set') ?? [],
        source: flag(p, 'source'), out: flag(p, 'out'), seed: int('seed', flag(p, 'seed'), undefined),
      };
      if (!opts.policies.length) throw new UsageError('floe eval needs a run id or a checkpoint folder (one column each; a run id gives its start and final checkpoints)');
      if (!opts.tasks.length) throw new UsageError('floe eval needs --tasks: a file with one task id per line (or a JSON array), toy, pool:RUN_ID or heldout:RUN_ID');
      if (opts.k < 1 || opts.k > 64) throw new UsageError(`--k must be from 1 to 64 attempts per task (got ${opts.k})`);
      await up(s);
      return runEval(s, opts);
    }
    case 'report': {
      const p = parseArgs(rest, { out: 'value' });
      const runId = p.positional[0];
      if (!runId) throw new UsageError('floe report needs a run id (see `floe run list`)');
      const out = flag(p, 'out') ?? path.join(repoRoot, 'runs', runId);
      const { html, json } = await writeReport(dbPool(s.postgres.url), runId, out);
      await closeDbPool();
      console.log(`report  ${html}\nsummary ${json}`);
      return 0;
    }
    case 'view': {
      const p = parseArgs(rest, { port: 'value', export: 'value', out: 'value' });
      const port = flag(p, 'port') ?? '8240';
      if (!/^\d+$/.test(port) || Number(port) > 65535) throw new UsageError(`--port must be a port number from 0 to 65535 (got '${port}')`);
      const { readOnlyPool } = await import('../store/rolloutView.js');
      const { exportRollout, startViewer } = await import('../report/viewer/server.js');
      const links = { workflow: (id: string) => webUiLink(s, id) };
      const tokenizers = { home: s.home, repoRoot };
      const db = readOnlyPool(s.postgres.url);
      const exported = flag(p, 'export');
      if (exported !== undefined) {
        const out = flag(p, 'out');
        if (!out) throw new UsageError('floe view --export ROLLOUT_ID needs --out FILE (the HTML file to write)');
        try { fs.writeFileSync(out, await exportRollout(db, exported, links, tokenizers)); } finally { await db.end(); }
        console.log(`rollout ${exported} → ${out}`);
        return 0;
      }
      if (flag(p, 'out') !== undefined) throw new UsageError('--out goes with --export ROLLOUT_ID');
      const viewer = await startViewer(db, { runId: p.positional[0], port: Number(port), links, tokenizers });
      console.log(`floe view  ${viewer.url}  (127.0.0.1 only, read-only on ${s.postgres.database}; Ctrl-C ends it)`);
      await new Promise<void>((resolve) => { process.once('SIGINT', resolve); process.once('SIGTERM', resolve); });
      await viewer.close();
      await db.end();
      return 0;
    }
    case 'models': {
      const p = parseArgs(rest, { name: 'value', sha256: 'value' });
      const [sub, file] = p.positional;
      const { BUILTIN_MODELS, buildPinnedModel, importGguf } = await import('../infra/components/models.js');
      if (!fs.existsSync(s.python.bin)) throw new Error(`no engine environment at ${s.python.bin}: run \`floe up\` first (it creates the venv with gguf and accelerate)`);
      if (sub === undefined) {
        for (const m of BUILTIN_MODELS) console.log(`model:${m.name} ${buildPinnedModel(s, m)}`);
        return 0;
      }
      if (sub !== 'import' || !file) throw new UsageError('usage: floe models | floe models import FILE.gguf [--name NAME] [--sha256 HEX]');
      if (!fs.existsSync(file)) throw new UsageError(`no file at ${file}: give the path of a .gguf file`);
      const folder = importGguf(s, file, { name: flag(p, 'name'), sha256: flag(p, 'sha256') });
      console.log(`model:${path.basename(folder)} ${folder}\n  use it with policy: { model: 'hf:model:${path.basename(folder)}', tokenizer: 'model:${path.basename(folder)}' }`);
      return 0;
    }
    case 'engine': {
      const p = parseArgs(rest, { kind: 'value', json: 'bool' });
      const [sub, url] = p.positional;
      if (sub !== 'probe' || !url) throw new UsageError('usage: floe engine probe <url> [--kind reference|vllm|sglang] [--json]');
      if (!/^https?:\/\//.test(url)) throw new UsageError(`engine url must start with http:// or https:// (got '${url}')`);
      const { ENGINE_KINDS } = await import('../activities/engines/index.js');
      const { formatProbe, probeEngine } = await import('../activities/engines/probe.js');
      const kind = flag(p, 'kind');
      if (kind !== undefined && !ENGINE_KINDS.includes(kind as EngineKind)) throw new UsageError(`unknown engine kind '${kind}' (reference, vllm or sglang)`);
      const report = await probeEngine(url, kind as EngineKind | undefined);
      console.log(flag(p, 'json') ? JSON.stringify(report, null, 2) : formatProbe(report));
      return report.ok ? 0 : 1;
    }
    case 'tasks': {
      const p = parseArgs(rest, { layout: 'value', pull: 'bool', json: 'bool' });
      const [sub, source] = p.positional;
      if (sub !== 'check' || !source) throw new UsageError('usage: floe tasks check <rows.jsonl|toy> [--layout auto|swe-bench|swe-gym|swe-rebench|r2e-gym] [--pull] [--json]');
      const layout = flag(p, 'layout') ?? 'auto';
      const { TASK_LAYOUTS } = await import('../core/taskLayouts.js');
      if (layout !== 'auto' && !(TASK_LAYOUTS as readonly string[]).includes(layout)) throw new UsageError(`unknown layout '${layout}' (auto, swe-bench, swe-gym, swe-rebench or r2e-gym)`);
      const { checkTasks } = await import('./tasks.js');
      return checkTasks(s, { source, layout: layout as TaskLayout | 'auto', pull: flag(p, 'pull') === 'true', json: flag(p, 'json') === 'true' });
    }
    case 'audit': {
      const p = parseArgs(rest, { layout: 'value', tasks: 'value', limit: 'value', concurrency: 'value', 'max-candidates': 'value', auditor: 'value', 'auditor-attempts': 'value' });
      const source = p.positional[0];
      if (!source) throw new UsageError('usage: floe audit <rows.jsonl|toy|real> [--tasks a,b] [--limit N] [--concurrency 2] [--max-candidates 200] [--layout auto|swe-bench|swe-gym|swe-rebench|r2e-gym] [--auditor RUN_CONFIG [--auditor-attempts 2]]');
      const num = (name: string, d: number) => {
        const v = flag(p, name);
        const n = v === undefined ? d : Number(v);
        if (!Number.isInteger(n) || n < (name === 'limit' ? 0 : 1)) throw new UsageError(`--${name} must be a whole number${name === 'limit' ? ' ≥ 0' : ' ≥ 1'} (got '${v}')`);
        return n;
      };
      if (flag(p, 'auditor-attempts') !== undefined && !flag(p, 'auditor')) throw new UsageError('--auditor-attempts needs --auditor RUN_CONFIG (the run config whose engines.endpoints the auditor agent uses)');
      await up(s);
      const { runAudit } = await import('./audit.js');
      return runAudit(s, {
        source, layout: (flag(p, 'layout') ?? 'auto') as TaskLayout | 'auto', include: (flag(p, 'tasks') ?? '').split(',').filter(Boolean),
        limit: num('limit', 0), concurrency: num('concurrency', 2), maxCandidates: num('max-candidates', 200),
        ...(flag(p, 'auditor') ? { auditor: { config: flag(p, 'auditor')!, attempts: num('auditor-attempts', 2) } } : {}),
      });
    }
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return cmd === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command '${cmd}'`);
  }
}

/** `floe config docs [--write]`: the run config reference, printed or written to its file;
 *  `floe config defaults`: the defaults as JSON. */
function configCommand(argv: string[]): number {
  const [sub, ...rest] = argv;
  const p = parseArgs(rest, { write: 'bool' });
  if (sub === 'defaults' && !p.positional.length && !flag(p, 'write')) {
    // every field's default, as JSON: scripts outside TypeScript (bench/recipe/stress_proxy.py)
    // take theirs from here rather than keep a copy
    process.stdout.write(`${JSON.stringify(parseRunConfig({}), null, 2)}\n`);
    return 0;
  }
  if (sub !== 'docs' || p.positional.length) throw new UsageError('usage: floe config docs [--write] | floe config defaults');
  const doc = renderConfigDoc(RunConfigSchema);
  if (!flag(p, 'write')) {
    process.stdout.write(doc);
    return 0;
  }
  const file = path.join(repoRoot, CONFIG_DOC_FILE);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, doc);
  console.log(`wrote ${CONFIG_DOC_FILE}`);
  return 0;
}

async function runCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const s = loadSettings();
  const p = parseArgs(rest, { set: 'multi', json: 'bool' });
  if (sub === 'start') {
    const config = loadRunConfig(p.positional[0], p.flags.get('set') ?? []);
    if (hostsItself(config)) {
      console.log(`floe run start: no engines.endpoints and no trainer.url, so this process hosts the run on this machine (${config.engines.count} embedded reference engine(s), a trainer and every worker), follows it to its end and stops them; Ctrl-C ends it. For servers of your own, list them in engines.endpoints and trainer.url.`);
      await up(s);
      return (await runDemo(s, config, { verdict: false })).ok ? 0 : 1;
    }
  }
  const client = await temporalClient(s);
  const runId = () => {
    const id = p.positional[0];
    if (!id) throw new UsageError(`floe run ${sub} needs a run id (see \`floe run list\`)`);
    return id;
  };
  try {
    switch (sub) {
      case 'start': {
        const config = loadRunConfig(p.positional[0], p.flags.get('set') ?? []);
        // engines, trainer, pool and images, before anything is written
        const { preflightRun, PreflightError } = await import('./preflight.js');
        const problems = await preflightRun(s, config);
        if (problems.length) throw new PreflightError(problems);
        const { runId: id, workflowId } = await startRun(client, config);
        console.log(`started run ${id}\n  workflow ${workflowId}\n  Web UI   ${webUiLink(s, workflowId)}`);
        return 0;
      }
      case 'list': {
        const runs = await listRuns(client);
        if (!runs.length) console.log('no runs yet: floe run start [config]');
        for (const r of runs) console.log(`${r.runId.padEnd(48)} ${r.status.padEnd(11)} ${r.startTime.toISOString()}`);
        return 0;
      }
      case 'status': {
        const st = await getRunStatus(client, runId());
        if (flag(p, 'json')) console.log(JSON.stringify(st, null, 2));
        else console.log(`${st.runId}: ${st.state}, policy v${st.policyVersion}, updates ${st.updatesDone}/${st.updatesTarget}, rollouts ${st.rolloutsFinished} (${st.rolloutsInFlight} in flight, ${st.discardedStale} stale), reward ${st.lastMeanReward ?? '–'}, pool ${st.pool.active} active\n  Web UI ${webUiLink(s, runWorkflowId(st.runId))}`);
        return 0;
      }
      case 'pause':
      case 'resume':
      case 'stop': {
        const fn = { pause, resume, stop }[sub];
        const st = await fn(client, runId());
        console.log(`${st.runId}: ${st.state}`);
        return 0;
      }
      default:
        throw new UsageError(`unknown subcommand 'run ${sub ?? ''}' (start, list, status, pause, resume, stop)`);
    }
  } finally {
    await client.connection.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) console.error(`floe: ${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError) console.error(`floe: ${err.message}`);
    else console.error(`floe: ${(err as Error).message ?? String(err)}`);
    process.exit(2);
  },
);
