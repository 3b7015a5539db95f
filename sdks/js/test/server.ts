/**
 * A real `fenec serve` for a test: by default `--clock manual --file
 * :memory:` on a free port; {@link launch} picks the clock, the file and the
 * address (to start a server again where it was).
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The binary `make build` writes; FENEC_BIN overrides it. */
export const FENEC_BIN = process.env['FENEC_BIN'] ?? fileURLToPath(new URL('../../../../bin/fenec', import.meta.url));

/** A running server. */
export interface Server {
  /** Its URL, such as `http://127.0.0.1:40123`. */
  url: string;
  /** Its address, such as `127.0.0.1:40123`. */
  addr: string;
  /** Stops it (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/** How {@link launch} starts a server. */
export interface Launch {
  clock?: 'manual' | 'system';
  file?: string;
  /** The address to listen on (default a free port on 127.0.0.1). */
  http?: string;
  args?: string[];
}

/** Starts a fresh server with a manual clock; `args` are more flags (`--token`, …). */
export function startServer(...args: string[]): Promise<Server> {
  return launch({ args });
}

/** Starts a server as `how` says. */
export async function launch(how: Launch = {}): Promise<Server> {
  if (!existsSync(FENEC_BIN)) throw new Error(`${FENEC_BIN} is missing: run make build`);
  const child = spawn(FENEC_BIN, [
    'serve', '--clock', how.clock ?? 'manual', '--http', how.http ?? '127.0.0.1:0', '--file', how.file ?? ':memory:',
    '--slow-ms', '0', ...(how.args ?? []),
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  child.stderr?.on('data', (b: Buffer) => stderr.push(b.toString()));
  const addr = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fenec did not start: ${stderr.join('')}`)), 10_000);
    child.once('exit', (code) => reject(new Error(`fenec exited (${code}): ${stderr.join('')}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  return { url: `http://${addr}`, addr, stop: () => stop(child) };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
