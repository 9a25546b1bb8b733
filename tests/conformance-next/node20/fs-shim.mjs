// fs plus a globSync stub, for code that imports { globSync } from "fs" on Node 20.
export * from 'node:fs';
import fs from 'node:fs';
export default fs;
export const globSync = fs.globSync ?? (() => { throw new Error('fs.globSync needs Node 22'); });
