// The workflow bundle's entry point: every workflow type floe registers.
export { trainingRun } from './trainingRun.js';
