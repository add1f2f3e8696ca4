/** How a run's conversations become token ids: the policy's tokenizer and chat template
 *  (activities/renderer.ts serves them). Pure: workflows import it. */

export interface RenderSpec {
  /** 'byte', a Hugging Face tokenizer folder, or builtin:NAME (FLOE_HOME/tokenizers/NAME). */
  tokenizer: string;
  /** A .jinja file; '' = the tokenizer folder's own template. */
  chatTemplate: string;
}

/** The byte tokenizer has no chat template of its own: the tiny policy's plain one. */
export const PLAIN_TEMPLATE = 'configs/templates/plain.jinja';

/** Runs started before the token path have neither field: theirs is the tiny policy's. */
export function renderSpec(policy: { tokenizer?: string; chatTemplate?: string }): RenderSpec {
  const tokenizer = policy.tokenizer || 'byte';
  return { tokenizer, chatTemplate: policy.chatTemplate || (tokenizer === 'byte' ? PLAIN_TEMPLATE : '') };
}
