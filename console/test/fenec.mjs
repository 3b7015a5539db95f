// Starting a real `fenec serve` (bin/fenec, or FENEC_BIN) for the
// browser tests; every server started is in servers, to stop after them.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const FENEC_BIN = process.env.FENEC_BIN ?? fileURLToPath(new URL('../../bin/fenec', import.meta.url));

/** The servers started, each with its url and stop(). */
export const servers = [];

/** Starts `fenec serve --clock manual` on a free port with more flags. */
export async function startFenec(...args) {
  if (!existsSync(FENEC_BIN)) throw new Error(`no fenec binary at ${FENEC_BIN}: set FENEC_BIN=/path/to/fenec, or install Go and run make build (make dist writes dist/fenec)`);
  const child = spawn(FENEC_BIN, ['serve', '--clock', 'manual', '--http', '127.0.0.1:0', '--file', ':memory:', '--sync', 'off', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = [];
  child.stderr.on('data', (b) => stderr.push(b.toString()));
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fenec did not start: ${stderr.join('')}`)), 15_000);
    child.once('exit', (code) => reject(new Error(`fenec exited (${code}): ${stderr.join('')}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  const s = {
    url: `http://${addr}`,
    stop: () =>
      child.exitCode !== null || child.signalCode !== null
        ? Promise.resolve()
        : new Promise((resolve) => {
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
  };
  servers.push(s);
  return s;
}

