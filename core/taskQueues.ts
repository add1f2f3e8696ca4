/** Task queue names. Sandbox and GPU activities run on the queue of the host / node that
 *  holds the container or the engine (Temporal's worker-specific task-queue pattern). */
export const CONTROL_QUEUE = 'floe-control';
export const sandboxQueue = (host: string): string => `floe-sandbox@${host}`;
export const gpuQueue = (node: string): string => `floe-gpu@${node}`;
