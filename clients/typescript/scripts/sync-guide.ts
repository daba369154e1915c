/**
 * `npm run sync-guide`: copy each example file into the code block that names it in
 * `docs/integration.md` (`<!-- example: <path> -->` above the block). `test/guide.test.ts`
 * fails while a block and its file differ.
 */
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const GUIDE = path.resolve(PACKAGE_DIR, "../../docs/integration.md");

const lines = (await readFile(GUIDE, "utf8")).split("\n");
const out: string[] = [];
for (let i = 0; i < lines.length; i += 1) {
  const line = lines[i] ?? "";
  out.push(line);
  const example = /^<!-- example: (\S+) -->$/.exec(line)?.[1];
  const fence = /^(```+)/.exec(lines[i + 1] ?? "")?.[1];
  if (example === undefined || fence === undefined) {
    continue;
  }
  const end = lines.findIndex((l, j) => j > i + 1 && l.startsWith(fence));
  if (end < 0) {
    throw new Error(`docs/integration.md:${i + 2}: a code block that never ends`);
  }
  const source = (await readFile(path.join(PACKAGE_DIR, example), "utf8")).replace(/\n$/, "");
  out.push(lines[i + 1] ?? fence, source, lines[end] ?? fence);
  i = end;
}
await writeFile(GUIDE, out.join("\n"));
