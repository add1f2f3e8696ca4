import { describe, expect, it } from 'vitest';
import { isLocalHost, postgresExposureProblem, redactUrl, redactUrlsIn, urlCredentialsProblem } from '../../core/exposure.js';
import { ConfigError, parseRunConfig } from '../../core/config.js';
import { loadSettings } from '../../infra/settings.js';

/** core/exposure.ts's rules, pure: passwords masked in printed URLs, a Postgres beyond loopback
 *  refused without a password or TLS (and loadSettings applying it), engine and trainer URLs
 *  with credentials refused by the run config. The live cases: test/chaos/exposure.test.ts. */

describe('redactUrl', () => {
  it('masks the password, in the user info or a query parameter, and leaves the rest as given', () => {
    expect(redactUrl('postgres://floe:s3cr%40t@db.example:5432/floe?sslmode=require')).toBe('postgres://floe:***@db.example:5432/floe?sslmode=require');
    expect(redactUrl('postgres://floe@db/floe?password=hunter2&sslmode=require')).toBe('postgres://floe@db/floe?password=***&sslmode=require');
    expect(redactUrl('postgres://floe@127.0.0.1:55432/floe')).toBe('postgres://floe@127.0.0.1:55432/floe');
    expect(redactUrl('http://127.0.0.1:8000')).toBe('http://127.0.0.1:8000');
    expect(redactUrl('not a url://floe:hunter2@x')).not.toContain('hunter2');
  });
});

describe('redactUrlsIn', () => {
  it('masks the user info of every URL in a message, and nothing else', () => {
    expect(redactUrlsIn('--set engines.endpoints=[{"url":"http://floe:sk-123@10.0.0.2:8000"}] + --set trainer.url=http://tok456@h:1'))
      .toBe('--set engines.endpoints=[{"url":"http://floe:***@10.0.0.2:8000"}] + --set trainer.url=http://***@h:1');
    expect(redactUrlsIn('mail me@example.com, see http://127.0.0.1:8000/x?a=b@c')).toBe('mail me@example.com, see http://127.0.0.1:8000/x?a=b@c');
  });
});

describe('isLocalHost', () => {
  it('loopback, localhost, a socket folder or no host; nothing else', () => {
    for (const h of ['127.0.0.1', '127.8.9.10', 'localhost', 'LOCALHOST', '::1', '[::1]', '::ffff:127.0.0.1', '/var/run/postgresql', '']) expect(isLocalHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.5', 'db.example', '128.0.0.1', '127.0.0.1.example.com', 'localhost.example.com']) expect(isLocalHost(h), h).toBe(false);
  });
});

describe('postgresExposureProblem', () => {
  const far = 'postgres://floe@db.example:5432/floe';
  it('refuses a remote host with neither a password nor TLS, naming the fix', () => {
    const p = postgresExposureProblem(far);
    expect(p).toContain('reaches Postgres on db.example with neither a password nor TLS');
    expect(p).toContain('postgres://USER:PASSWORD@HOST:PORT/DB');
    expect(p).toContain('sslmode=verify-full');
    for (const mode of ['disable', 'allow', 'prefer']) expect(postgresExposureProblem(`${far}?sslmode=${mode}`), mode).not.toBeNull();
    expect(postgresExposureProblem('postgres://floe@0.0.0.0:55432/floe', { variable: 'FLOE_PG_HOST' })).toContain('(from FLOE_PG_HOST)');
    expect(postgresExposureProblem('postgres:///floe?host=db.example')).not.toBeNull();
    expect(postgresExposureProblem('postgres:///floe', { env: { PGHOST: 'db.example' } })).not.toBeNull();
  });
  it('accepts a password (URL, query, PGPASSWORD, password file) or TLS (sslmode require / verify-*, ssl=true, a client certificate)', () => {
    for (const url of ['postgres://floe:pw@db.example/floe', `${far}?password=pw`, `${far}?sslmode=require`, `${far}?sslmode=verify-ca`, `${far}?sslmode=verify-full`, `${far}?sslmode=no-verify`, `${far}?ssl=true`, `${far}?sslcert=/c.pem&sslkey=/k.pem`]) {
      expect(postgresExposureProblem(url), url).toBeNull();
    }
    expect(postgresExposureProblem(far, { env: { PGPASSWORD: 'pw' } })).toBeNull();
    expect(postgresExposureProblem(far, { env: { PGSSLMODE: 'verify-full' } })).toBeNull();
    expect(postgresExposureProblem(far, { passwordFile: true })).toBeNull();
  });
  it('accepts any local Postgres as it is (the embedded default trusts loopback)', () => {
    for (const url of ['postgres://floe@127.0.0.1:55432/floe', 'postgres://floe@localhost/floe', 'postgres://floe@[::1]:5432/floe', 'postgres:///floe?host=/var/run/postgresql', 'postgres://%2Fvar%2Frun%2Fpostgresql/floe', 'socket:/var/run/postgresql?db=floe']) {
      expect(postgresExposureProblem(url), url).toBeNull();
    }
  });
  it('refuses what is not a Postgres URL, without echoing its password', () => {
    const p = postgresExposureProblem('mysql://floe:hunter2@db.example/floe');
    expect(p).toContain('is not a postgres:// URL');
    expect(p).not.toContain('hunter2');
  });
  it('an empty password is no password', () => {
    expect(postgresExposureProblem('postgres://floe@db.example/floe?sslmode=prefer&password=')).not.toBeNull();
  });
});

describe('loadSettings applies it', () => {
  const withEnv = (env: Record<string, string | undefined>, fn: () => void) => {
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    for (const [k, v] of Object.entries(env)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    try { fn(); } finally {
      for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    }
  };
  const none = { PGPASSWORD: undefined, PGSSLMODE: undefined, PGHOST: undefined, PGPASSFILE: '/nonexistent/pgpass' };
  it('throws for FLOE_DATABASE_URL beyond loopback without a password, and for FLOE_PG_HOST=0.0.0.0', () => {
    withEnv({ ...none, FLOE_DATABASE_URL: 'postgres://floe@10.1.2.3:5432/floe' }, () => expect(() => loadSettings()).toThrow(/\(from FLOE_DATABASE_URL\) reaches Postgres on 10\.1\.2\.3/));
    withEnv({ ...none, FLOE_DATABASE_URL: undefined, FLOE_PG_HOST: '0.0.0.0' }, () => expect(() => loadSettings()).toThrow(/\(from FLOE_PG_HOST\).*leave FLOE_PG_HOST unset/));
  });
  it('keeps the URL when it has a password or TLS, and the embedded default', () => {
    withEnv({ ...none, FLOE_DATABASE_URL: 'postgres://floe:pw@10.1.2.3:5432/floe' }, () => expect(loadSettings().postgres.url).toBe('postgres://floe:pw@10.1.2.3:5432/floe'));
    withEnv({ ...none, FLOE_DATABASE_URL: undefined, FLOE_PG_HOST: undefined }, () => expect(loadSettings().postgres.url).toMatch(/^postgres:\/\/\w+@127\.0\.0\.1:\d+\//));
  });
});

describe('urlCredentialsProblem and the run config', () => {
  it('refuses user info in an engine or trainer URL, masking it, and accepts URLs without', () => {
    expect(urlCredentialsProblem('http://apikey@10.0.0.2:8000')).toMatch(/^http:\/\/\*\*\*@10\.0\.0\.2:8000\/ carries credentials/);
    expect(urlCredentialsProblem('http://10.0.0.2:8000')).toBeNull();
    expect(urlCredentialsProblem('')).toBeNull();
    let err: unknown;
    try {
      parseRunConfig({ engines: { endpoints: [{ id: 'a', url: 'http://user:sk-live-123@10.0.0.2:8000' }] }, trainer: { url: 'http://token@10.0.0.3:8200' } });
    } catch (e) { err = e; }
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues;
    expect(issues.map((i) => i.path)).toEqual(['engines.endpoints.0.url', 'trainer.url']);
    expect((err as ConfigError).message).not.toMatch(/sk-live-123|token@/);
    // the source names the --set it came from, masked too
    const quoted = new ConfigError([{ path: 'x', message: 'bad' }], '--set engines.endpoints=[{"url":"http://u:sk-live-123@h:1"}]');
    expect(quoted.message).toContain('http://u:***@h:1');
    expect(quoted.message).not.toContain('sk-live-123');
    expect(parseRunConfig({ engines: { endpoints: [{ id: 'a', url: 'http://10.0.0.2:8000' }] }, trainer: { url: 'http://10.0.0.3:8200' } }).trainer.url).toBe('http://10.0.0.3:8200');
  });
});
