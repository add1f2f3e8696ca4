/** A small, strict argument parser: unknown flags are errors that name the flag. */
export interface Parsed { positional: string[]; flags: Map<string, string[]> }

export class UsageError extends Error {}

export function parseArgs(argv: string[], known: Record<string, 'bool' | 'value' | 'multi'>): Parsed {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) { positional.push(a); continue; }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    const kind = known[name];
    if (!kind) throw new UsageError(`unknown option --${name} (known: ${Object.keys(known).map((k) => `--${k}`).join(', ') || 'none'})`);
    let value = 'true';
    if (kind !== 'bool') {
      value = inline ?? argv[++i];
      if (value === undefined) throw new UsageError(`option --${name} needs a value`);
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { positional, flags };
}

export const flag = (p: Parsed, name: string): string | undefined => p.flags.get(name)?.at(-1);
