import fs from 'node:fs';

/** Which TCP ports a process listens on, and on which address, read from Linux's /proc: the
 *  kernel's socket tables (/proc/net/tcp, tcp6) joined with the socket inodes a process holds
 *  open (/proc/<pid>/fd). The exposure chaos cases (test/chaos/exposure.test.ts) use it to tell
 *  a server bound to loopback from one bound to every interface. */

export interface Listener { address: string; port: number; inode: number }

/** A /proc/net/tcp address: IPv4 as one little-endian 32-bit word, IPv6 as four of them. */
export function procAddress(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse().map((b) => parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join('.');
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i] << 8) | bytes[2 * i + 1]).toString(16));
  const mapped = groups.slice(0, 5).every((g) => g === '0') && groups[5] === 'ffff';
  if (mapped) return `::ffff:${bytes.slice(12).join('.')}`;
  const text = groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::');
  return text.replace(/^:::/, '::').replace(/:::$/, '::');
}

/** Every listening TCP socket in this network namespace. */
export function tcpListeners(): Listener[] {
  const out: Listener[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!fs.existsSync(file)) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue; // 0A: LISTEN
      const [addr, port] = f[1].split(':');
      out.push({ address: procAddress(addr), port: parseInt(port, 16), inode: Number(f[9]) });
    }
  }
  return out;
}

/** The socket inodes process `pid` holds open. */
export function socketInodes(pid: number): Set<number> {
  const inodes = new Set<number>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(Number(m[1]));
    } catch { /* closed meanwhile */ }
  }
  return inodes;
}

/** The TCP sockets process `pid` listens on. */
export function listenersOf(pid: number): Listener[] {
  const mine = socketInodes(pid);
  return tcpListeners().filter((l) => mine.has(l.inode));
}

/** The process holding socket `inode` open (the first one found), or null. */
export function ownerOf(inode: number): number | null {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (socketInodes(Number(entry)).has(inode)) return Number(entry);
    } catch { /* gone, or not ours to read */ }
  }
  return null;
}

export const isLoopback = (address: string): boolean => /^127\./.test(address) || address === '::1' || /^::ffff:127\./.test(address);

export const describeListeners = (ls: Listener[]): string => ls.map((l) => `${l.address.includes(':') ? `[${l.address}]` : l.address}:${l.port}`).sort().join(', ');
