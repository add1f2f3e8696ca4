import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/** The documents cannot drift from the repository: every relative link in README.md,
 *  CHANGELOG.md and docs/ resolves (a file, and for an #anchor into markdown a heading, by
 *  GitHub's slugs); every repository path the documents name in backticks exists; the README
 *  stays short and free of run history; and nothing in the repository points at a file outside
 *  it. Each rule is also run on a document made to break it (its negative control). */

const root = path.join(import.meta.dirname, '..', '..');

/** Top-level folders whose paths the docs name; a backticked `dir/…` under one must exist. */
const REPO_DIRS = ['core', 'activities', 'workflows', 'store', 'workers', 'cli', 'client', 'report', 'infra', 'engine', 'harness', 'bench', 'test', 'db', 'configs', 'tasks', 'docs'];

/** What must not appear in the repository: references to a design file or folder outside it
 *  (spelt in pieces, so that this file does not hold them either: `git grep` finds none). */
const SHARED = 'shared';
const DESIGN = ['DESIGN', 'md'].join('.');
const OUTSIDE_REFERENCES = [`../${SHARED}`, `/${SHARED}/`, DESIGN];

const temps: string[] = [];
afterAll(() => { for (const t of temps) fs.rmSync(t, { recursive: true, force: true }); });
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-docs-test-'));
  temps.push(d);
  return d;
}

// ---------- markdown ----------

/** The text with fenced code blocks blanked (line numbers kept): links and headings there are not. */
function withoutFences(md: string): string {
  let fence: string | null = null;
  return md.split('\n').map((line) => {
    const m = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === null && m) { fence = m[1][0].repeat(m[1].length); return ''; }
    if (fence !== null) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = null;
      return '';
    }
    return line;
  }).join('\n');
}

/** GitHub's anchor for a heading's text: lower case, punctuation and symbols dropped (letters,
 *  digits, marks, `_` and `-` kept), each space a hyphen. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link: its text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*~]/g, ''); // code and emphasis markers
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
}

/** Every anchor a markdown text has: its ATX headings' slugs, repeats numbered as GitHub does. */
export function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutFences(md).split('\n')) {
    const m = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = githubSlug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The targets of a markdown text's inline links and images, outside code. */
function linkTargets(md: string): { target: string; line: number }[] {
  const out: { target: string; line: number }[] = [];
  withoutFences(md).split('\n').forEach((text, i) => {
    const line = text.replace(/`[^`]*`/g, '');
    for (const m of line.matchAll(/!?\[(?:[^\][]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1], line: i + 1 });
  });
  return out;
}

/** Broken relative links of one markdown file: a missing file, a missing heading, or a path
 *  that leaves the repository. `base` is the repository root the file belongs to. */
export function brokenLinks(file: string, base: string): string[] {
  const md = fs.readFileSync(file, 'utf8');
  const problems: string[] = [];
  const rel = path.relative(base, file);
  for (const { target, line } of linkTargets(md)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
    const resolved = pathPart ? path.resolve(path.dirname(file), pathPart) : file;
    const repoPath = path.relative(base, resolved);
    if (repoPath.startsWith('..') || path.isAbsolute(repoPath)) { problems.push(`${rel}:${line}: ${target} points outside the repository`); continue; }
    if (!fs.existsSync(resolved)) {
      problems.push(`${rel}:${line}: ${target}: no such file`);
      continue;
    }
    if (anchor !== null && resolved.endsWith('.md') && fs.statSync(resolved).isFile()) {
      if (!anchorsOf(fs.readFileSync(resolved, 'utf8')).has(anchor)) problems.push(`${rel}:${line}: ${target}: no heading #${anchor} in ${repoPath}`);
    }
  }
  return problems;
}

/** Repository paths named in backticks (outside code blocks) that do not exist. */
export function missingPaths(file: string, base: string): string[] {
  const md = fs.readFileSync(file, 'utf8');
  const pathLike = new RegExp(`^(?:${REPO_DIRS.join('|')})/[\\w.@/-]*$`);
  const problems: string[] = [];
  withoutFences(md).split('\n').forEach((text, i) => {
    for (const m of text.matchAll(/`([^`\n]+)`/g)) {
      const p = m[1].trim();
      if (!pathLike.test(p)) continue;
      if (!fs.existsSync(path.join(base, p))) problems.push(`${path.relative(base, file)}:${i + 1}: \`${p}\` does not exist`);
    }
  });
  return problems;
}

/** What a README must not be: long, or a run log (commit hashes, dated result paragraphs). */
export function readmeProblems(text: string): string[] {
  const problems: string[] = [];
  const lines = text.split('\n');
  const count = text.endsWith('\n') ? lines.length - 1 : lines.length;
  if (count > 300) problems.push(`${count} lines (at most 300)`);
  lines.forEach((line, i) => {
    for (const m of line.matchAll(/\b[0-9a-f]{7,40}\b/g)) {
      if (/[a-f]/.test(m[0]) && /[0-9]/.test(m[0])) problems.push(`line ${i + 1}: a commit hash (${m[0]}): run history belongs in docs/results.md`);
    }
    for (const m of line.matchAll(/\b20\d\d-[01]\d-[0-3]\d\b/g)) problems.push(`line ${i + 1}: a dated result (${m[0]}): run history belongs in docs/results.md`);
  });
  return problems;
}

/** Files (repository-relative) whose text refers to something outside the repository. */
export function outsideReferences(files: readonly string[], base: string): string[] {
  const problems: string[] = [];
  for (const f of files) {
    const full = path.join(base, f);
    let st: fs.Stats;
    try { st = fs.lstatSync(full); } catch { continue; } // deleted in the work tree
    if (!st.isFile()) continue; // symlinks (node_modules), folders
    const buf = fs.readFileSync(full);
    for (const needle of OUTSIDE_REFERENCES) if (buf.includes(needle)) problems.push(`${f}: contains ${needle}`);
  }
  return problems;
}

// ---------- the repository's documents ----------

function markdownUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.md')).map((f) => path.join(dir, f)).sort();
}
const documents = [path.join(root, 'README.md'), path.join(root, 'CHANGELOG.md'), ...markdownUnder(path.join(root, 'docs'))];

describe('the documents', () => {
  it('exist: README, CHANGELOG and the docs folder', () => {
    for (const f of ['README.md', 'CHANGELOG.md', 'docs/design.md', 'docs/architecture.md', 'docs/results.md']) expect(fs.existsSync(path.join(root, f)), f).toBe(true);
    expect(markdownUnder(path.join(root, 'docs', 'guides')).length).toBeGreaterThan(0);
  });

  it('link only to files and headings that exist', () => {
    expect(documents.flatMap((f) => brokenLinks(f, root))).toEqual([]);
  });

  it('name only repository paths that exist', () => {
    expect(documents.flatMap((f) => missingPaths(f, root))).toEqual([]);
  });

  it('keep the README short and free of run history', () => {
    expect(readmeProblems(fs.readFileSync(path.join(root, 'README.md'), 'utf8'))).toEqual([]);
  });

  it('nothing in the repository refers to a design file or folder outside it', () => {
    const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' })
      .split('\0').filter(Boolean)
      .filter((f) => !f.startsWith('bench/results/') && f !== 'CHANGELOG.md' && f !== 'test/unit/docs.test.ts');
    expect(files.length).toBeGreaterThan(100);
    expect(outsideReferences([...new Set(files)], root)).toEqual([]);
  });
});

// ---------- negative controls: each rule, on a document made to break it ----------

describe('the checks themselves', () => {
  it('slugs headings as GitHub does', () => {
    expect(githubSlug('The token path: messages → renderer → ids → engine → ids')).toBe('the-token-path-messages--renderer--ids--engine--ids');
    expect(githubSlug('Recipe layers (`floe stress`)')).toBe('recipe-layers-floe-stress');
    expect(githubSlug('Weights over NCCL (trainer -> engines on one node): design')).toBe('weights-over-nccl-trainer---engines-on-one-node-design');
    expect(githubSlug('vLLM: the floe_vllm worker extension')).toBe('vllm-the-floe_vllm-worker-extension');
    expect(githubSlug('8. Locked doors')).toBe('8-locked-doors');
    expect(githubSlug('See [the guide](x.md)')).toBe('see-the-guide');
    expect([...anchorsOf('# A\n## A\n```\n# not a heading\n```\n### A\n')]).toEqual(['a', 'a-1', 'a-2']);
  });

  it('the link checker reports a broken link and a broken anchor, and only those', () => {
    const d = tempDir();
    fs.mkdirSync(path.join(d, 'docs'));
    fs.writeFileSync(path.join(d, 'docs', 'other.md'), '# Other\n\n## A real section\n');
    fs.writeFileSync(path.join(d, 'docs', 'page.md'), [
      '# Page',
      '[fine](other.md) and [fine too](other.md#a-real-section) and [here](#page) and [web](https://temporal.io)',
      '[broken](missing.md)',
      '[broken anchor](other.md#no-such-section)',
      '[outside](../../elsewhere/design.md)',
      '`[not a link](nowhere.md)`',
      '```',
      '[in code](nowhere.md)',
      '```',
    ].join('\n'));
    const problems = brokenLinks(path.join(d, 'docs', 'page.md'), d);
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/page\.md:3: missing\.md: no such file/);
    expect(problems[1]).toMatch(/page\.md:4: other\.md#no-such-section: no heading #no-such-section/);
    expect(problems[2]).toMatch(/page\.md:5: .*points outside the repository/);
  });

  it('the path checker reports a path that does not exist, and only that', () => {
    const d = tempDir();
    fs.mkdirSync(path.join(d, 'core'));
    fs.writeFileSync(path.join(d, 'core', 'config.ts'), '');
    fs.writeFileSync(path.join(d, 'page.md'), 'See `core/config.ts`, `core/gone.ts`, `runs/<run id>/` and `npm test`.\n```\n`core/in-code.ts`\n```\n');
    const problems = missingPaths(path.join(d, 'page.md'), d);
    expect(problems).toEqual(['page.md:1: `core/gone.ts` does not exist']);
  });

  it('the README rules catch a long README, a commit hash and a dated result', () => {
    expect(readmeProblems('# floe\n\nShort, and current.\n')).toEqual([]);
    expect(readmeProblems(`${'line\n'.repeat(301)}`)).toEqual(['301 lines (at most 300)']);
    const dated = readmeProblems('The last run, at 6e1138f on 2026-12-06: PASS.\n');
    expect(dated).toHaveLength(2);
    expect(dated[0]).toContain('commit hash (6e1138f)');
    expect(dated[1]).toContain('dated result (2026-12-06)');
    expect(readmeProblems('deadbeef and 1234567 are not hashes here.\n')).toEqual([]);
  });

  it('the outside-reference scan reports files that point outside the repository', () => {
    const d = tempDir();
    fs.writeFileSync(path.join(d, 'a.ts'), `// see ../${SHARED}/${DESIGN}\n`);
    fs.writeFileSync(path.join(d, 'b.md'), `model: hf:/${SHARED}/run/v0\n`);
    fs.writeFileSync(path.join(d, 'c.md'), 'docs/design.md, /models/run/v0\n');
    fs.symlinkSync(path.join(d, 'a.ts'), path.join(d, 'link'));
    expect(outsideReferences(['a.ts', 'b.md', 'c.md', 'link', 'gone.md'], d)).toEqual([
      `a.ts: contains ../${SHARED}`, `a.ts: contains /${SHARED}/`, `a.ts: contains ${DESIGN}`, `b.md: contains /${SHARED}/`,
    ]);
  });
});
