import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RunConfigSchema } from '../../core/config.js';
import { CONFIG_DOC_COMMAND, CONFIG_DOC_FILE, renderConfigDoc } from '../../core/configDoc.js';

const committed = fs.readFileSync(path.join(import.meta.dirname, '..', '..', CONFIG_DOC_FILE), 'utf8');

/** RunConfigSchema with more fields (extend drops the root's description: it is given back). */
const extended = (shape: z.core.$ZodLooseShape) => RunConfigSchema.extend(shape).meta(RunConfigSchema.meta()!);

/** RunConfigSchema with one more field in its trainer section. */
function withTrainerField(field: z.ZodDefault<z.ZodNumber>) {
  const trainer = RunConfigSchema.shape.trainer;
  return extended({ trainer: trainer.unwrap().extend({ momentum: field }).prefault({}).meta(trainer.meta()!) });
}

describe('the run config reference', () => {
  it(`is ${CONFIG_DOC_FILE}, as rendered from the schema`, () => {
    expect(renderConfigDoc(RunConfigSchema), `${CONFIG_DOC_FILE} differs from the schema: run \`${CONFIG_DOC_COMMAND}\` and commit it`).toBe(committed);
  });

  it('has a row for every field of every section', () => {
    for (const [section, s] of Object.entries(RunConfigSchema.shape)) {
      const inner = 'unwrap' in s ? s.unwrap() : s;
      const keys = inner instanceof z.ZodObject ? Object.keys(inner.shape).map((k) => `${section}.${k}`) : [section];
      for (const k of keys) expect(committed).toContain(`| \`${k}\` |`);
    }
  });

  it('refuses a field or a section without a description, naming it', () => {
    expect(() => renderConfigDoc(withTrainerField(z.number().default(0.9)))).toThrow(/^trainer\.momentum has no description/);
    const undescribedSection = extended({ logging: z.strictObject({ level: z.string().default('info').meta({ description: 'How much to log.' }) }).prefault({}) });
    expect(() => renderConfigDoc(undescribedSection)).toThrow(/^logging has no description/);
  });

  it('shows a described new field, so the committed copy no longer matches', () => {
    const doc = renderConfigDoc(withTrainerField(z.number().min(0).max(1).default(0.9).meta({ description: 'Momentum of the optimizer.' })));
    expect(doc).toContain('| `trainer.momentum` | number (≥ 0, ≤ 1) | `0.9` | Momentum of the optimizer. |');
    expect(doc).not.toBe(committed);
  });
});
