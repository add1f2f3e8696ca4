import { NativeConnection } from '@temporalio/worker';
import { Connection, Client } from '@temporalio/client';
import type { Settings } from '../infra/settings.js';

/** Connections to Temporal, with an error that says what to do when it is not there. */

function unreachable(s: Settings, err: unknown): Error {
  return new Error(`cannot reach Temporal at ${s.temporal.address} (${(err as Error).message}); run \`floe up\`, or set FLOE_TEMPORAL_ADDRESS to your cluster`);
}

export async function workerConnection(s: Settings): Promise<NativeConnection> {
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
