/** What floe shows and accepts about the services it reaches (issue 17, exposure):
 *  - a URL that carries a password is printed with the password masked (`redactUrl`,
 *    `redactUrlsIn` for a message that quotes one): `floe up` and `floe doctor` print the
 *    Postgres URL, a config error quotes the `--set` it came from, and their output lands in
 *    terminals, CI logs and log files;
 *  - a Postgres beyond this machine must ask for a password or speak TLS
 *    (`postgresExposureProblem`): the embedded cluster trusts every local connection, which
 *    is only safe on loopback;
 *  - an engine or trainer URL cannot carry credentials (`urlCredentialsProblem`): floe's HTTP
 *    client refuses such URLs, and the run config that would hold them is kept in Postgres and
 *    in Temporal's history. */

const MASK = '***';

/** Hosts that never leave this machine: loopback addresses, `localhost`, a unix socket folder,
 *  or none (the client's default, a local socket or localhost). */
export function isLocalHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === '' || h.startsWith('/') || h === 'localhost' || h.endsWith('.localhost')) return true;
  if (/^127(\.\d{1,3}){3}$/.test(h)) return true;
  return h === '::1' || h === '0:0:0:0:0:0:0:1' || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

function parse(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** `url` with its password (user info, or a `password=` query parameter) replaced by ***. */
export function redactUrl(url: string): string {
  const u = parse(url);
  if (!u) return url.replace(/(\/\/[^/@:]*:)[^/@]*@/, `$1${MASK}@`);
  if (!u.password && !u.searchParams.has('password')) return url;
  if (u.password) u.password = MASK;
  if (u.searchParams.has('password')) u.searchParams.set('password', MASK);
  return u.toString();
}

/** `text` with the user info of every URL in it masked: user:secret@ → user:***@, a bare
 *  token@ → ***@. For messages that echo what the user typed (a `--set` naming a URL). */
export function redactUrlsIn(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@"'`]+)@/gi, (_, scheme: string, info: string) => {
    const colon = info.indexOf(':');
    return `${scheme}${colon >= 0 ? `${info.slice(0, colon)}:` : ''}${MASK}@`;
  });
}

/** The environment variables libpq and node-postgres read when the URL leaves them out. */
export interface PgEnv { PGHOST?: string; PGPASSWORD?: string; PGSSLMODE?: string }

const TLS_MODES = new Set(['require', 'verify-ca', 'verify-full', 'no-verify']);

/** Why a Postgres URL must not be used, or null. A host beyond loopback needs a password
 *  (in the URL, PGPASSWORD or a password file) or TLS (sslmode=require / verify-ca /
 *  verify-full, ssl=true, or a client certificate sslcert=…). `variable` names where the URL
 *  came from, for the message. */
export function postgresExposureProblem(url: string, opts: { env?: PgEnv; passwordFile?: boolean; variable?: string } = {}): string | null {
  const env = opts.env ?? {};
  const variable = opts.variable ?? 'FLOE_DATABASE_URL';
  const u = parse(url);
  if (u?.protocol === 'socket:') return null; // node-postgres' unix socket form: socket:/folder?db=…
  if (!u || !/^postgres(ql)?:$/.test(u.protocol)) return `the Postgres URL ${redactUrl(url)} (from ${variable}) is not a postgres:// URL; give postgres://USER:PASSWORD@HOST:PORT/DATABASE`;
  const q = u.searchParams;
  const host = q.get('host') ?? (u.hostname ? decodeURIComponent(u.hostname) : (env.PGHOST ?? ''));
  if (isLocalHost(host)) return null;
  const password = u.password !== '' || (q.get('password') ?? '') !== '' || (env.PGPASSWORD ?? '') !== '' || opts.passwordFile === true;
  const sslmode = (q.get('sslmode') ?? env.PGSSLMODE ?? '').toLowerCase();
  const tls = TLS_MODES.has(sslmode) || ['true', '1'].includes(q.get('ssl') ?? '') || (q.get('sslcert') ?? '') !== '';
  if (password || tls) return null;
  return `the Postgres URL ${redactUrl(url)} (from ${variable}) reaches Postgres on ${host} with neither a password nor TLS: anyone who can reach that port could read and rewrite floe's audit history. `
    + 'Give the role a password (postgres://USER:PASSWORD@HOST:PORT/DB, or PGPASSWORD) or require TLS (?sslmode=verify-full, with a client certificate: &sslcert=…&sslkey=…); '
    + 'for the embedded cluster, leave FLOE_PG_HOST unset (it listens on 127.0.0.1 only and trusts local connections)';
}

/** Why an engine or trainer URL must not be used, or null: user info (user:secret@) is a
 *  credential floe cannot send and would store. */
export function urlCredentialsProblem(url: string): string | null {
  const u = parse(url);
  if (!u || (u.username === '' && u.password === '')) return null;
  u.username = MASK;
  if (u.password) u.password = MASK;
  return `${u.toString()} carries credentials (user:password@): floe sends none and would keep them in the run's config (Postgres, Temporal history). `
    + 'Reach the server over a private network or an SSH tunnel, or put an authenticating proxy on its host, and give floe the URL without user info';
}
