/**
 * This package's version, as its User-Agent names it; a test keeps it equal
 * to package.json's.
 */
export const VERSION = '0.1.0';

interface Runtimes {
  Deno?: { version?: { deno?: string } };
  Bun?: { version?: string };
  process?: { versions?: { node?: string } };
}

/**
 * `fenecdb-js/<version> <runtime>/<version>` under Deno, Bun or Node; in a
 * browser undefined, since a page cannot set User-Agent (fetch drops it).
 * Deno and Bun come first: both also fill in `process.versions.node`.
 */
export function userAgent(): string | undefined {
  const g = globalThis as Runtimes;
  const runtime = g.Deno?.version?.deno !== undefined ? `deno/${g.Deno.version.deno}`
    : g.Bun?.version !== undefined ? `bun/${g.Bun.version}`
    : g.process?.versions?.node !== undefined ? `node/${g.process.versions.node}`
    : undefined;
  return runtime === undefined ? undefined : `fenecdb-js/${VERSION} ${runtime}`;
}

/** An environment variable under Node, Bun or Deno; undefined in a browser (or without Deno's --allow-env). */
export function env(name: string): string | undefined {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> }; Deno?: { env?: { get(name: string): string | undefined } } };
  try {
    return g.Deno?.env?.get(name) ?? g.process?.env?.[name];
  } catch {
    return undefined;
  }
}
