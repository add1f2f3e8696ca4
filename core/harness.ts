import type { ExecResult } from './sandboxPolicy.js';
import { TOOLS, type ArgSpec } from './tools.js';

/** The agent harness, in the spirit of mini-swe-agent: one system prompt, the issue, and
 *  strictly alternating model turns and observations. Everything the model sees is built
 *  here, in one place: the conversation, and each observation with its truncation. */

/** The default system prompt (`rollout.systemPrompt`). It spells out the call format for
 *  policies whose template does not list tools (the tiny policy's plain template); chat
 *  templates additionally get the tools' JSON schemas (toolSchemas). */
export const SYSTEM_PROMPT = [
  'Fix the issue in the Python repository in the current directory.',
  'End every reply with exactly one tool call, nothing after it:',
  '<tool_call>{"name":"bash","arguments":{"command":"..."}}</tool_call> runs a command;',
  '<tool_call>{"name":"submit","arguments":{}}</tool_call> submits the repository as your fix.',
].join('\n');

export interface TurnRecord {
  /** The model's raw output, as text (a view: the exact ids are in turn_tokens). */
  rawText: string;
  /** What the model was shown after it (null for the last turn). */
  observation: string | null;
}

/** A chat message, in the shape chat templates take (OpenAI / Hugging Face). */
export interface Message { role: 'system' | 'user' | 'assistant' | 'tool'; content: string }

/** A tool as chat templates expect it: an OpenAI-style function with a JSON schema. */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description: string; parameters: { type: 'object'; properties: Record<string, { type: string; description: string }>; required: string[] } };
}

/** The registry (core/tools.ts) as the JSON schemas a chat template lists. */
export function toolSchemas(): ToolSchema[] {
  return Object.entries(TOOLS).map(([name, spec]) => {
    const args = spec.args as Readonly<Record<string, ArgSpec>>;
    return {
      type: 'function',
      function: {
        name,
        description: spec.description,
        parameters: {
          type: 'object',
          properties: Object.fromEntries(Object.entries(args).map(([k, a]) => [k, { type: a.type, description: a.description }])),
          required: Object.entries(args).filter(([, a]) => !a.optional).map(([k]) => k),
        },
      },
    };
  });
}

/** The conversation the model is in: system prompt, the issue, then each earlier turn
 *  and the tool result it got. A renderer (core/tokenPath.ts, activities/renderer.ts)
 *  turns it into token ids with the model's own chat template. */
export function conversation(systemPrompt: string, problemStatement: string, turns: readonly TurnRecord[]): Message[] {
  const messages: Message[] = [{ role: 'system', content: systemPrompt }, { role: 'user', content: problemStatement.trim() }];
  for (const t of turns) {
    messages.push({ role: 'assistant', content: t.rawText });
    if (t.observation !== null) messages.push({ role: 'tool', content: t.observation });
  }
  return messages;
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

/** The observation the model sees after a bash call. A NUL byte in the output is shown as
 *  U+FFFD: what the model is shown is exactly what the audit history stores (Postgres text
 *  holds no NUL), and the renderer tokenizes that text. */
export function renderObservation(r: ExecResult, maxChars: number, timeoutSeconds: number): string {
  const notes: string[] = [];
  if (r.timedOut) notes.push(`killed: no result within ${timeoutSeconds} s`);
  if (r.killedReason === 'output_limit') notes.push('killed: too much output');
  if (r.killedReason === 'oom') notes.push('killed: out of memory');
  if (r.killedReason === 'pids') notes.push('killed: too many processes');
  if (r.truncated && r.killedReason !== 'output_limit') notes.push(`output truncated (${r.outputBytes} bytes)`);
  const head = `exit code ${r.exitCode}${notes.length ? ` (${notes.join('; ')})` : ''}`;
  const body = r.output.length ? truncateMiddle(r.output.replace(/\u0000/g, '\uFFFD'), maxChars) : '(no output)';
  return `${head}\n${body}`;
}
