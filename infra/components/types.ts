import type { Settings } from '../settings.js';

/** One service or artefact that `floe up` installs and starts, `floe down` stops and `floe doctor` checks. */
export interface Component {
  name: string;
  /** Installed only by `floe up --test` (tools the test suite needs, not floe itself). */
  testOnly?: boolean;
  /** Install what is missing and start it; idempotent. */
  up(s: Settings): Promise<void>;
  /** Stop what `up` started (no-op for artefacts and external services). */
  down(s: Settings): Promise<void>;
  /** Current state, and for a failure what to do next. */
  doctor(s: Settings): Promise<Health>;
}

export interface Health { ok: boolean; detail: string; fix?: string }
