// npm's `prepare` (docs: "runs on local npm install without any arguments,
// before npm pack, and for a folder or git dependency"): builds dist/src
// (ESM) and dist/cjs (CommonJS), what the package's exports point at. A
// folder installed from another project (`npm install path/to/sdks/js`) gets no devDependencies from npm,
// so when TypeScript is missing this installs the pinned ones first.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });

if (!existsSync(tsc)) {
  const npm = process.env.npm_execpath;
  if (npm) run(process.execPath, [npm, 'ci', '--ignore-scripts', '--no-audit', '--no-fund']);
  else run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund']);
}
rmSync(join(root, 'dist', 'src'), { recursive: true, force: true });
run(process.execPath, [tsc, '-p', 'tsconfig.build.json']);
run(process.execPath, [join(root, 'scripts', 'cjs.mjs')]);
