import fs from 'node:fs';
import path from 'node:path';
import type { Settings } from '../settings.js';
import { SEARCH_ATTRIBUTES } from '../../core/searchAttributes.js';
import type { Component, Health } from './types.js';
import { log, mustRun, portOpen, readPid, startDaemon, stopDaemon, tail, waitFor, which } from '../proc.js';

/** The real Temporal server in dev mode (SQLite file + Web UI), from a pinned Temporal CLI
 *  built with the Go toolchain into the project's tools folder. */

const GO_PACKAGE = 'github.com/temporalio/cli/cmd/temporal';

export function temporalBin(s: Settings): string {
  return path.join(s.toolsBin, 'temporal');
}

function installedVersion(bin: string): string | null {
  const stamp = `${bin}.version`;
  return fs.existsSync(bin) && fs.existsSync(stamp) ? fs.readFileSync(stamp, 'utf8').trim() : null;
}

export function installTemporalCli(s: Settings): void {
  const bin = temporalBin(s);
  if (installedVersion(bin) === s.temporal.cliVersion) return;
  const go = which('go') ?? (fs.existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : null);
  if (!go) throw new Error('temporal: the Go toolchain is needed to build the pinned Temporal CLI; install Go (https://go.dev/dl) or set FLOE_TEMPORAL_ADDRESS to an existing cluster');
  fs.mkdirSync(s.toolsBin, { recursive: true });
  log('temporal', `building Temporal CLI ${s.temporal.cliVersion} with ${go} (first time only, a few minutes)…`);
  mustRun(go, ['install', `${GO_PACKAGE}@${s.temporal.cliVersion}`], 'go install of the Temporal CLI', {
    env: { ...process.env, GOBIN: s.toolsBin, GOFLAGS: '-mod=mod', CGO_ENABLED: '0' },
  });
  fs.writeFileSync(`${bin}.version`, s.temporal.cliVersion);
}

/** The arguments of `temporal server start-dev` for floe: its namespace and search attributes,
 *  SQLite in write-ahead mode; `uiPort` null: no Web UI. `dynamicConfig`: server settings (a
 *  test's low continue-as-new threshold, say). */
export function devServerArgs(o: { dbFile: string; host: string; port: number; uiPort: number | null; namespace: string; dynamicConfig?: Record<string, string | number> }): string[] {
  return [
    'server', 'start-dev',
    '--db-filename', o.dbFile,
    '--ip', o.host,
    '--port', String(o.port),
    ...(o.uiPort === null ? ['--headless'] : ['--ui-port', String(o.uiPort)]),
    '--namespace', o.namespace,
    '--log-level', 'warn',
    // write-ahead log, synced at checkpoints: the dev server's history survives a killed
    // process (as before) and costs ~30% less CPU than SQLite's default rollback journal,
    // which syncs every transaction (bench/throughput.ts, 2026-12-02: 12.9 → 9.0 core-s of
    // Temporal for the same 32 rollouts). Only a crash of the machine itself can lose the last
    // transactions.
    '--sqlite-pragma', 'journal_mode=wal',
    '--sqlite-pragma', 'synchronous=normal',
    ...Object.entries(SEARCH_ATTRIBUTES).flatMap(([k, t]) => ['--search-attribute', `${k}=${t}`]),
    ...Object.entries(o.dynamicConfig ?? {}).flatMap(([k, v]) => ['--dynamic-config-value', `${k}=${v}`]),
  ];
}

const pidFile = (s: Settings) => path.join(s.runDir, 'temporal.pid');
const logFile = (s: Settings) => path.join(s.logDir, 'temporal.log');

export const temporal: Component = {
  name: 'temporal',
  async up(s) {
    if (s.temporal.external) {
      log('temporal', `using external cluster at ${s.temporal.address}`);
      return;
    }
    installTemporalCli(s);
    if (await portOpen(s.temporal.host, s.temporal.port)) {
      log('temporal', `already serving on ${s.temporal.address} (UI ${s.temporal.uiUrl})`);
      return;
    }
    fs.mkdirSync(s.dataDir, { recursive: true });
    fs.mkdirSync(s.runDir, { recursive: true });
    const args = devServerArgs({ dbFile: s.temporal.dbFile, host: s.temporal.host, port: s.temporal.port, uiPort: s.temporal.uiPort, namespace: s.temporal.namespace });
    log('temporal', `starting dev server (history in ${path.relative(process.cwd(), s.temporal.dbFile)})…`);
    startDaemon({ name: 'temporal', cmd: temporalBin(s), args, logFile: logFile(s), pidFile: pidFile(s) });
    await waitFor('Temporal server', () => portOpen(s.temporal.host, s.temporal.port), 90_000, `see ${logFile(s)}:\n${tail(logFile(s))}`);
    await waitFor('Temporal Web UI', () => portOpen(s.temporal.host, s.temporal.uiPort), 30_000, `see ${logFile(s)}`);
    log('temporal', `ready at ${s.temporal.address}; Web UI ${s.temporal.uiUrl}`);
  },
  async down(s) {
    if (await stopDaemon(pidFile(s))) log('temporal', 'stopped');
  },
  async doctor(s): Promise<Health> {
    const serving = await portOpen(s.temporal.host, s.temporal.port);
    const ui = await portOpen(s.temporal.host, s.temporal.uiPort);
    if (serving) {
      return { ok: true, detail: `serving ${s.temporal.address}, namespace ${s.temporal.namespace}; Web UI ${ui ? s.temporal.uiUrl : 'not answering'}` };
    }
    const pid = readPid(pidFile(s));
    return {
      ok: false,
      detail: pid ? `process ${pid} is running but ${s.temporal.address} does not answer` : `not running at ${s.temporal.address}`,
      fix: s.temporal.external ? `check FLOE_TEMPORAL_ADDRESS=${s.temporal.address} is reachable` : `run \`floe up\`; if it keeps failing see ${logFile(s)}`,
    };
  },
};
