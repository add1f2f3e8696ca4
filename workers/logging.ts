import { DefaultLogger, Runtime, type LogEntry } from '@temporalio/worker';
import type { LogLevel } from '@temporalio/common';

/** The Temporal runtime's logger for floe's processes: the SDK's own messages at WARN and
 *  above (FLOE_LOG_LEVEL=INFO|DEBUG|TRACE for more), one compact line each, so a terminal
 *  shows floe's progress rather than the SDK's INFO stream. Installed once, before the first
 *  worker connection (the runtime is a process-wide singleton). */

const LEVELS: LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];
let installed = false;
/** Warnings that are floe's design, not a problem: sandbox and gpu workers run activities only. */
const EXPECTED = /^No (workflows|Nexus services) registered/;

function line(e: LogEntry): string {
  const m = e.meta ?? {};
  const ids = ['workflowId', 'activityType', 'workflowType', 'taskQueue'].filter((k) => typeof m[k] === 'string').map((k) => `${k}=${String(m[k])}`);
  const err = m.error as { message?: string } | undefined;
  return `[temporal] ${e.level} ${e.message}${ids.length ? ` ${ids.join(' ')}` : ''}${err?.message ? `: ${err.message}` : ''}`;
}

export function installRuntimeLogger(): void {
  if (installed) return;
  installed = true;
  const asked = (process.env.FLOE_LOG_LEVEL ?? 'WARN').toUpperCase() as LogLevel;
  const level = LEVELS.includes(asked) ? asked : 'WARN';
  try {
    Runtime.install({
      logger: new DefaultLogger(level, (e) => { if (!EXPECTED.test(e.message)) console.error(line(e)); }),
      // the SDK core's own (Rust) messages go through the same logger and filter, one line each
      telemetryOptions: { logging: { filter: { core: level, other: level }, forward: {} } },
    });
  } catch {
    // a runtime exists already in this process (something connected first): keep it
  }
}
