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
