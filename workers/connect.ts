import { NativeConnection } from '@temporalio/worker';
import { Connection, Client } from '@temporalio/client';
import type { Settings } from '../infra/settings.js';
import { installRuntimeLogger } from './logging.js';

/** Connections to Temporal, with an error that says what to do when it is not there. */

function unreachable(s: Settings, err: unknown): Error {
  return new Error(`cannot reach Temporal at ${s.temporal.address} (${(err as Error).message}); run \`floe up\`, or set FLOE_TEMPORAL_ADDRESS to your cluster`);
}

export async function workerConnection(s: Settings): Promise<NativeConnection> {
  installRuntimeLogger(); // before the runtime exists: floe's log lines, not the SDK's INFO stream
  try {
    return await NativeConnection.connect({ address: s.temporal.address });
  } catch (err) {
    throw unreachable(s, err);
  }
}

export async function temporalClient(s: Settings): Promise<Client> {
  try {
    const connection = await Connection.connect({ address: s.temporal.address, connectTimeout: '5 seconds' });
    return new Client({ connection, namespace: s.temporal.namespace });
  } catch (err) {
    throw unreachable(s, err);
  }
}
