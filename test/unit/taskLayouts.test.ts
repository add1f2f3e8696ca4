import { describe, expect, it } from 'vitest';
import { hiddenImagePaths, imageLoadHint, publishedImage } from '../../core/taskLayouts.js';
import { detectLayout, parseTaskRow, SweRowSchema } from '../../core/taskModel.js';
import { repoDirOf, sandboxMemoryMb, sandboxTmpfs } from '../../core/sandboxPolicy.js';

/** Dataset layouts (pure): image names as each dataset publishes them, layout detection, and
 *  where the repository lives in the sandbox. */

const row = { instance_id: 'Django__django-11099', repo: 'django/django', base_commit: 'abc', problem_statement: 'p', test_patch: '', FAIL_TO_PASS: ['t'] };

describe('task layouts', () => {
  it('names images as SWE-bench and SWE-Gym publish them', () => {
    // swebench 4.1.0 instance_image_key: lower-cased id, "__" → "_1776_" under the namespace
    expect(publishedImage('swe-bench', 'Django__django-11099')).toBe('docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest');
    expect(publishedImage('swe-gym', 'getmoto__moto-5752')).toBe('docker.io/xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest');
    expect(publishedImage('swe-rebench', 'x__y-1')).toBeNull();
    expect(publishedImage('r2e-gym', 'x__y-1')).toBeNull();
  });

  it('tells R2E-Gym and SWE-rebench rows by their columns, the rest read as SWE-bench', () => {
    expect(detectLayout(SweRowSchema.parse(row))).toBe('swe-bench');
    expect(detectLayout(SweRowSchema.parse({ ...row, docker_image: 'i', install_config: { test_cmd: 'pytest' } }))).toBe('swe-rebench');
    expect(detectLayout(SweRowSchema.parse({ ...row, expected_output_json: '{}' }))).toBe('r2e-gym');
  });

  it('refuses a row whose layout names no image, naming the field', () => {
    expect(() => parseTaskRow(row, 'rows.jsonl:3', 'd', undefined, 'swe-rebench')).toThrow(/rows\.jsonl:3: field docker_image: missing: swe-rebench rows name their image/);
    expect(parseTaskRow(row, 'rows.jsonl:3', 'd', undefined, 'swe-gym').source).toEqual({ kind: 'image', image: 'docker.io/xingyaoww/sweb.eval.x86_64.django_s_django-11099:latest' });
  });

  it('keeps the repository at /testbed for images, with the disk there and a small /work', () => {
    expect(repoDirOf({ kind: 'image' })).toBe('/testbed');
    expect(repoDirOf({ kind: 'directory' })).toBe('/work/repo');
    const limits = { diskMb: 1000, memoryMb: 100 };
    const atTestbed = Object.fromEntries(sandboxTmpfs(limits, '/testbed').map((m) => [m.path, m.sizeMb]));
    expect(atTestbed).toMatchObject({ '/testbed': 1000, '/work': 16 });
    expect(sandboxTmpfs(limits).some((m) => m.path === '/testbed')).toBe(false);
    // every tmpfs is counted in the memory limit, wherever the repository is
    expect(sandboxMemoryMb(limits, '/testbed') - sandboxMemoryMb(limits)).toBe(16);
  });

  it('hides the hidden tests R2E-Gym images ship, and says how to load a missing image', () => {
    expect(hiddenImagePaths('r2e-gym')).toEqual(['/r2e_tests']);
    expect(hiddenImagePaths('swe-bench')).toEqual([]);
    expect(imageLoadHint('docker.io/swebench/sweb.eval.x86_64.a_1776_b-1:latest')).toMatch(/podman load -i swebench_sweb\.eval\.x86_64\.a_1776_b-1_latest\.tar/);
  });
});
