/**
 * The SDK as a user gets it, installed as npm installs it (docs/sdks.md,
 * "Tests every SDK has"):
 * `npm install <folder>` and `npm pack` (whose `prepare` builds dist/src
 * and dist/cjs each time), the root imported and `require()`d, the tarball installed into a
 * project in a temp folder outside the repository, every ```ts block of
 * README.md and examples/worker.ts type-checked there by `tsc` under strict,
 * exactOptionalPropertyTypes and noUncheckedIndexedAccess, a consumer
 * type-checked under moduleResolution node10 and bundler, and the compiled
 * worker example run against a real `fenec serve`.
 */

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { connect, expr } from '../src/client.js';
import { launch } from './server.js';

const run = promisify(execFile);
/** sdks/js, from dist/test/. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const NPM = process.env['npm_execpath'];

/** Runs npm with `args` in `cwd` (the npm that runs this test, when it does). */
function npm(cwd: string, ...args: string[]) {
  const [cmd, pre] = NPM ? [process.execPath, [NPM]] : ['npm', []];
  return run(cmd, [...pre, ...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, maxBuffer: 1 << 24 });
}

/** The ```ts blocks of a Markdown text. */
export function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
}

test('packed, installed outside the repository, type-checked and run as a user would', { timeout: 600_000 }, async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'fenec-js-pack-'));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));

  // A copy of the package as git holds it (no dist/), with the checkout's devDependencies.
  const pkg = join(tmp, 'pkg');
  mkdirSync(join(pkg, 'scripts'), { recursive: true });
  for (const f of ['package.json', 'package-lock.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'tsconfig.json', 'tsconfig.build.json', 'tsconfig.cjs.json', 'scripts/prepare.mjs', 'scripts/cjs.mjs']) {
    cpSync(join(ROOT, f), join(pkg, f));
  }
  cpSync(join(ROOT, 'src'), join(pkg, 'src'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'), 'dir');
  const packed = await npm(pkg, 'pack', '--json', '--pack-destination', tmp);
  const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  assert.ok(info, packed.stdout);
  const files = info.files.map((f) => f.path).sort();
  for (const f of ['README.md', 'LICENSE', 'CHANGELOG.md', 'package.json', 'dist/src/client.js', 'dist/src/client.d.ts', 'dist/src/worker.js', 'dist/src/generated/transport.js', 'dist/cjs/client.js', 'dist/cjs/client.d.ts', 'dist/cjs/package.json']) {
    assert.ok(files.includes(f), `${f} is not in the tarball: ${files.join(', ')}`);
  }
  assert.deepEqual(files.filter((f) => !/^(README\.md|LICENSE|CHANGELOG\.md|package\.json|dist\/(src|cjs)\/.*\.(js|d\.ts)|dist\/cjs\/package\.json)$/.test(f)), [], 'files a user does not need');

  // `npm install <folder>`: npm links the folder and runs its `prepare`, which builds dist/src.
  rmSync(join(pkg, 'dist'), { recursive: true, force: true });
  const linked = join(tmp, 'linked');
  mkdirSync(linked);
  writeFileSync(join(linked, 'package.json'), JSON.stringify({ name: 'linked-project', private: true, type: 'module' }));
  await npm(linked, 'install', '--offline', pkg);
  const imported = await run(process.execPath, ['--input-type=module', '-e',
    "import { connect } from '@fenecdb/web/client'; console.log(connect('http://x.invalid').from('jobs').where('id', 1).renderRows().query);"], { cwd: linked });
  assert.equal(imported.stdout, 'get jobs where id = $1\n');
  // The root, by import and by require() (the CommonJS build).
  const root = "console.log(connect('http://x.invalid').from('jobs').where('id', 1).renderRows().query, typeof worker);";
  const esm = await run(process.execPath, ['--input-type=module', '-e', `import { connect, worker } from '@fenecdb/web'; ${root}`], { cwd: linked });
  assert.equal(esm.stdout, 'get jobs where id = $1 function\n');
  const cjs = await run(process.execPath, ['--input-type=commonjs', '-e', `const { connect, worker } = require('@fenecdb/web'); ${root}`], { cwd: linked });
  assert.equal(cjs.stdout, 'get jobs where id = $1 function\n');
  const cjsClient = await run(process.execPath, ['--input-type=commonjs', '-e', "console.log(typeof require('@fenecdb/web/client').connect)"], { cwd: linked });
  assert.equal(cjsClient.stdout, 'function\n');

  // A user's project: the tarball, and nothing else from the repository.
  const proj = join(tmp, 'proj');
  mkdirSync(proj);
  writeFileSync(join(proj, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
  await npm(proj, 'install', '--offline', join(tmp, info.filename));
  const blocks = tsBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));
  assert.ok(blocks.length >= 7, `${blocks.length} ts blocks in README.md`);
  blocks.forEach((code, i) => writeFileSync(join(proj, `readme-${i + 1}.ts`), code));
  cpSync(join(ROOT, 'examples', 'worker.ts'), join(proj, 'worker.ts'));
  writeFileSync(join(proj, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', lib: ['ES2022', 'DOM'], module: 'NodeNext', moduleResolution: 'NodeNext',
      strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true,
      types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')], skipLibCheck: false, outDir: 'dist',
    },
    include: ['*.ts'],
  }));
  const checked = await run(process.execPath, [TSC, '-p', proj], { cwd: proj }).catch((err: { stdout?: string }) => err);
  assert.ok(!('stdout' in checked) || checked.stdout === '', `tsc in the user's project:\n${'stdout' in checked ? checked.stdout : ''}`);

  // A consumer of the root and of /client, type-checked as older and bundler projects resolve packages.
  const consumer = join(tmp, 'consumer');
  mkdirSync(consumer);
  symlinkSync(join(proj, 'node_modules'), join(consumer, 'node_modules'), 'dir');
  writeFileSync(join(consumer, 'use.ts'), [
    "import { connect, worker, type WorkerError } from '@fenecdb/web';",
    "import { expr } from '@fenecdb/web/client';",
    "const db = connect('http://127.0.0.1:8080');",
    "const w = worker(db.from<{ id: number; run_at: Date | null }>('jobs'), (job) => void job.id, { onError: (err: WorkerError) => void err.step });",
    "export const done: Promise<void> = w.runUntilEmpty();",
    "export const n: Promise<number> = db.from('jobs').update({ run_at: expr('now()') });",
  ].join('\n'));
  for (const [module, moduleResolution] of [['commonjs', 'node10'], ['esnext', 'bundler']] as const) {
    writeFileSync(join(consumer, `tsconfig.${moduleResolution}.json`), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', lib: ['ES2022', 'DOM'], module, moduleResolution, strict: true, noEmit: true,
        types: [], skipLibCheck: false,
      },
      files: ['use.ts'],
    }));
    const out = await run(process.execPath, [TSC, '-p', `tsconfig.${moduleResolution}.json`], { cwd: consumer }).catch((err: { stdout?: string }) => err);
    assert.ok(!('stdout' in out) || out.stdout === '', `tsc with moduleResolution ${moduleResolution}:\n${'stdout' in out ? out.stdout : ''}`);
  }

  // The compiled worker example against a real server: it runs every job, and stops on SIGTERM.
  const server = await launch({ clock: 'system' });
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)');
  await db.from('jobs').insert(Array.from({ length: 20 }, (_, i) => ({ payload: { to: `u${i}@example.com` }, run_at: expr('now()'), attempts: 0 })));
  const child = spawn(process.execPath, [join(proj, 'dist', 'worker.js')], { env: { ...process.env, FENEC_URL: server.url }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.after(() => void child.kill('SIGKILL'));
  const end = Date.now() + 15_000;
  while ((await db.from('jobs').count()) > 0 && Date.now() < end) await sleep(50);
  assert.equal(await db.from('jobs').count(), 0, `jobs left; the worker said:\n${out}`);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, out);
  assert.equal(out.split('\n').filter((l) => l.startsWith('mail to u')).length, 20, out);
});
