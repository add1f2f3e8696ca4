import { Context } from '@temporalio/activity';

/** The one heartbeat helper of the sandbox package: a Temporal heartbeat when running as an
 *  activity, a no-op when called directly (tests, scripts). */
export function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // not inside an activity
  }
}

/** Heartbeat every few seconds while a long call (an archive copy) runs. */
export async function keepAlive<T>(work: Promise<T>, what: string): Promise<T> {
  const beat = setInterval(() => heartbeat(what), 5000);
  try {
    return await work;
  } finally {
    clearInterval(beat);
  }
}
