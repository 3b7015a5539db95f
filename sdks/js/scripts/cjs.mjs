// The CommonJS build a `require('@fenecdb/web')` loads (package.json's
// "require" condition and "main"): src/ compiled again as CommonJS into
// dist/cjs/, with a package.json there that tells Node its .js files are
// CommonJS (the package itself is "type": "module").
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
rmSync(join(root, 'dist', 'cjs'), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.cjs.json'], { cwd: root, stdio: 'inherit' });
writeFileSync(join(root, 'dist', 'cjs', 'package.json'), '{"type": "commonjs"}\n');
