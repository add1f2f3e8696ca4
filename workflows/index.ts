// The workflow bundle's entry point: every workflow type floe registers.
export { trainingRun } from './trainingRun.js';
export { rollout } from './rollout.js';
export { rewardGate } from './rewardGate.js';
export { weightUpdate } from './weightUpdate.js';
export { eviction } from './eviction.js';
export { evaluation } from './evaluation.js';
export { dataAudit, auditRun } from './dataAudit.js';
