/** A minimal tar writer: mount roots, staged files and patch files go into containers as
 *  archives (putArchive). */

export interface TarEntry { name: string; type: 'file' | 'dir'; mode: number; uid: number; gid: number; data?: Buffer }

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

/** A minimal ustar archive (names up to 100 bytes): enough for mount roots and patch files. */
export function tarArchive(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = e.type === 'file' ? e.data ?? Buffer.alloc(0) : Buffer.alloc(0);
    const h = Buffer.alloc(512);
    const name = Buffer.from(e.name);
    if (name.length > 100) throw new Error(`tar entry name too long: ${e.name}`);
    name.copy(h, 0);
    h.write(octal(e.mode & 0o7777, 8), 100, 'ascii');
    h.write(octal(e.uid, 8), 108, 'ascii');
    h.write(octal(e.gid, 8), 116, 'ascii');
    h.write(octal(data.length, 12), 124, 'ascii');
    h.write(octal(Math.floor(Date.now() / 1000), 12), 136, 'ascii');
    h.write('        ', 148, 'ascii');
    h.write(e.type === 'dir' ? '5' : '0', 156, 'ascii');
    h.write('ustar\0' + '00', 257, 'ascii');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(octal(sum, 7) + ' ', 148, 'ascii');
    blocks.push(h, data);
    if (data.length % 512) blocks.push(Buffer.alloc(512 - (data.length % 512)));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A file of a grader's stage folder (`floe-grade/<name>`, put into /tmp), owned by the agent. */
export function stageFile(name: string, data: Buffer | string, mode = 0o644): TarEntry {
  return { name: `floe-grade/${name}`, type: 'file', mode, uid: 1000, gid: 1000, data: Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8') };
}

/** The stage folder itself (`floe-grade/`, or a folder in it), owned by the agent. */
export const stageDir = (name = ''): TarEntry => ({ name: `floe-grade/${name}`, type: 'dir', mode: 0o755, uid: 1000, gid: 1000 });
