import { describe, expect, it } from 'vitest';
import { readTarFiles, tarArchive } from '../activities/sandbox/tar.js';

/** The tar reader that reads a keeper job's answer out of a container (getArchive). */
describe('readTarFiles', () => {
  it('reads back what tarArchive wrote: files by name, folders skipped, empty and block-sized files', () => {
    const big = Buffer.alloc(1024, 7);
    const files = readTarFiles(tarArchive([
      { name: 'job.done/', type: 'dir', mode: 0o700, uid: 0, gid: 0 },
      { name: 'job.done/out', type: 'file', mode: 0o600, uid: 0, gid: 0, data: Buffer.from([0xff, 0x00, 0x41]) },
      { name: 'job.done/rc', type: 'file', mode: 0o600, uid: 0, gid: 0, data: Buffer.from('0\n') },
      { name: 'job.done/empty', type: 'file', mode: 0o600, uid: 0, gid: 0 },
      { name: 'job.done/big', type: 'file', mode: 0o600, uid: 0, gid: 0, data: big },
    ]));
    expect([...files.keys()]).toEqual(['job.done/out', 'job.done/rc', 'job.done/empty', 'job.done/big']);
    expect(files.get('job.done/out')).toEqual(Buffer.from([0xff, 0x00, 0x41]));
    expect(files.get('job.done/rc')!.toString()).toBe('0\n');
    expect(files.get('job.done/empty')!.length).toBe(0);
    expect(files.get('job.done/big')).toEqual(big);
  });

  it('takes a pax header\'s path for the next entry, and the ustar prefix', () => {
    const long = `${'d'.repeat(120)}/file`;
    const record = (k: string, v: string) => { const body = ` ${k}=${v}\n`; let n = body.length + 2; n = body.length + String(n).length; return `${n}${body}`; };
    const pax = tarArchive([{ name: 'PaxHeader', type: 'file', mode: 0o644, uid: 0, gid: 0, data: Buffer.from(record('path', long)) }]);
    pax[156] = 'x'.charCodeAt(0); // turn the entry into a pax header (checksum is not read)
    const body = tarArchive([{ name: 'short', type: 'file', mode: 0o644, uid: 0, gid: 0, data: Buffer.from('x') }]);
    const files = readTarFiles(Buffer.concat([pax.subarray(0, pax.length - 1024), body]));
    expect([...files.entries()]).toEqual([[long, Buffer.from('x')]]);
    const prefixed = tarArchive([{ name: 'f', type: 'file', mode: 0o644, uid: 0, gid: 0, data: Buffer.from('y') }]);
    prefixed.write('some/prefix\0', 345, 'ascii');
    expect([...readTarFiles(prefixed).keys()]).toEqual(['some/prefix/f']);
  });
});
