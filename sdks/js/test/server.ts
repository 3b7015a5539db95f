/**
 * A real `fenec serve` for a test: by default `--clock manual --file
 * :memory:` on a free port; {@link launch} picks the clock, the file and the
 * address (to start a server again where it was).
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  /** Sends it `signal` and waits for it to exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
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
  if (!existsSync(FENEC_BIN)) throw new Error(`no fenec binary at ${FENEC_BIN}: set FENEC_BIN=/path/to/fenec, or install Go and run make build (make dist writes dist/fenec)`);
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
  const scheme = how.args?.includes('--tls-cert') ? 'https' : 'http';
  return { url: `${scheme}://${addr}`, addr, stop: () => stop(child), kill: (signal) => stop(child, signal) };
}

function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}

/** A node of a {@link startCluster} cluster. */
export interface ClusterNode {
  id: string;
  /** Its HTTP URL (also the URL it advertises as leader). */
  url: string;
  /** Whether its process runs. */
  up: boolean;
  /** Sends it a signal (SIGKILL: a crash) and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Three (or n) real `fenec serve` nodes on loopback; stop them all with `stop`. */
export interface Cluster {
  nodes: ClusterNode[];
  token: string;
  /** The node that leads and takes writes, waited for (bounded by `within` ms). */
  leader(within?: number): Promise<ClusterNode>;
  /** GET `path` on a node, with the token: status and text. */
  get(node: ClusterNode, path: string): Promise<{ status: number; text: string }>;
  /** POST a JSON body to `path` on a node, with the token. */
  post(node: ClusterNode, path: string, body: unknown): Promise<{ status: number; text: string }>;
  stop(): Promise<void>;
}

/** A free port on 127.0.0.1 (the nodes' addresses are fixed before they start: each names the others). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts a cluster as server/cmd/fenec/cluster_test.go does (docs/cluster.md):
 * `--node-id nK --raft 127.0.0.1:P --http 127.0.0.1:H --file … --bootstrap
 * n1=…,n2=…,n3=…`, a token, and waits until a node leads and takes a write.
 */
export async function startCluster(n = 3, token = 'cluster-token'): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'fenec-cluster-'));
  const specs: { id: string; http: string; raft: string }[] = [];
  for (let i = 1; i <= n; i++) specs.push({ id: `n${i}`, http: `127.0.0.1:${await freePort()}`, raft: `127.0.0.1:${await freePort()}` });
  const bootstrap = specs.map((s) => `${s.id}=${s.raft}`).join(',');
  const nodes: ClusterNode[] = [];
  const servers: Server[] = [];
  for (const s of specs) {
    const server = await launch({
      clock: 'system', http: s.http, file: join(dir, `${s.id}.db`),
      args: ['--node-id', s.id, '--raft', s.raft, '--bootstrap', bootstrap, '--token', token],
    });
    servers.push(server);
    const node: ClusterNode = {
      id: s.id, url: server.url, up: true,
      kill: async (signal = 'SIGKILL') => {
        node.up = false;
        await server.kill(signal);
      },
    };
    nodes.push(node);
  }
  const call = async (node: ClusterNode, method: string, path: string, body?: unknown) => {
    const res = await fetch(node.url + path, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body), signal: AbortSignal.timeout(5000),
    });
    return { status: res.status, text: await res.text() };
  };
  const cluster: Cluster = {
    nodes, token,
    get: (node, path) => call(node, 'GET', path),
    post: (node, path, body) => call(node, 'POST', path, body),
    async leader(within = 20_000) {
      const deadline = Date.now() + within;
      while (Date.now() < deadline) {
        for (const node of nodes.filter((x) => x.up)) {
          try {
            const st = await cluster.get(node, '/_cluster');
            if (st.status !== 200 || (JSON.parse(st.text) as { role: string }).role !== 'leader') continue;
            const w = await cluster.post(node, '/query', { query: 'create collection if not exists probes (k int)', params: [] });
            if (w.status === 200) return node;
          } catch {
            // down or not answering yet: the next node, or the next round
          }
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no node of the cluster led and took a write within ${within} ms`);
    },
    async stop() {
      await Promise.all(servers.map((s) => s.kill('SIGKILL')));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await cluster.leader();
  return cluster;
}
