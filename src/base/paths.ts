import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

// The same code runs from src/ (tests) and from dist/src/ (npm start); both find the package
// root by walking up to package.json, so proto/, lua/ and config/ resolve identically.
function findProjectRoot(start: string): string {
  let dir = start;
  for (let i = 0; i < 10; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(`floodgate: cannot find package.json above ${start}`);
}

/** Absolute path of the project root (where package.json, proto/ and lua/ live). */
export const projectRoot = findProjectRoot(__dirname);
export const protoDir = join(projectRoot, 'proto');
export const luaDir = join(projectRoot, 'lua');
