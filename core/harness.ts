import type { ExecResult } from './sandboxPolicy.js';

/** The agent harness, in the spirit of mini-swe-agent: one system prompt, the issue, and
 *  strictly alternating model turns and observations. Everything the model sees is built
 *  here, in one place: the prompt, and each observation with its truncation. */

export const SYSTEM_PROMPT = [
  'Fix the issue in the Python repository in the current directory.',
  'End every reply with exactly one tool call, nothing after it:',
  '<tool_call>{"name":"bash","arguments":{"command":"..."}}</tool_call> runs a command;',
  '<tool_call>{"name":"submit","arguments":{}}</tool_call> submits the repository as your fix.',
].join('\n');

export interface TurnRecord {
  /** The model's raw output, exactly as generated. */
  rawText: string;
  /** What the model was shown after it (null for the last turn). */
  observation: string | null;
}

/** The prompt for the next turn: system prompt, issue, then every earlier turn and its observation. */
export function renderPrompt(problemStatement: string, turns: readonly TurnRecord[]): string {
  let p = `SYSTEM:\n${SYSTEM_PROMPT}\n\nISSUE:\n${problemStatement.trim()}\n`;
  for (const t of turns) {
    p += `\nASSISTANT:\n${t.rawText}\n`;
    if (t.observation !== null) p += `\nOBSERVATION:\n${t.observation}\n`;
  }
  return `${p}\nASSISTANT:\n`;
}

/** Keep the head and the tail of long output: errors tend to be at the end, context at the start. */
export function truncateMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const marker = (n: number) => `\n[… ${n} chars omitted …]\n`;
  const budget = Math.max(0, maxChars - marker(text.length).length);
  const head = Math.ceil(budget / 2);
  const tail = budget - head;
  return `${text.slice(0, head)}${marker(text.length - budget)}${tail > 0 ? text.slice(text.length - tail) : ''}`;
}

/** The observation the model sees after a bash call. */
export function renderObservation(r: ExecResult, maxChars: number, timeoutSeconds: number): string {
  const notes: string[] = [];
  if (r.timedOut) notes.push(`killed: no result within ${timeoutSeconds} s`);
  if (r.killedReason === 'output_limit') notes.push('killed: too much output');
  if (r.killedReason === 'oom') notes.push('killed: out of memory');
  if (r.killedReason === 'pids') notes.push('killed: too many processes');
  if (r.truncated && r.killedReason !== 'output_limit') notes.push(`output truncated (${r.outputBytes} bytes)`);
  const head = `exit code ${r.exitCode}${notes.length ? ` (${notes.join('; ')})` : ''}`;
  const body = r.output.length ? truncateMiddle(r.output, maxChars) : '(no output)';
  return `${head}\n${body}`;
}
