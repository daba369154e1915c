/**
 * Every code block of `docs/integration.md` is an example file the other tests run: each block
 * is preceded by `<!-- example: <path under clients/typescript> -->` and must equal that file.
 * The Next.js example's files are all in the guide, each naming its own path on its first line.
 */
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { it } from "node:test";

import { PACKAGE_DIR, REPO_DIR } from "./support/tally.js";

const GUIDE = path.join(REPO_DIR, "docs/integration.md");
const MARKER = /^<!-- example: (\S+) -->$/;

/** The guide's fenced blocks: the example each names (if any), its first line number and its text. */
function blocks(markdown: string): { example: string | undefined; line: number; text: string }[] {
  const lines = markdown.split("\n");
  const found: { example: string | undefined; line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const fence = /^(```+|~~~+)/.exec(lines[i] ?? "");
    if (fence === null) {
      continue;
    }
    const end = lines.findIndex((l, j) => j > i && l.startsWith(fence[1] ?? "```"));
    assert.ok(end > i, `docs/integration.md:${i + 1}: a code block that never ends`);
    let before = i - 1;
    while (before >= 0 && (lines[before] ?? "").trim() === "") {
      before -= 1;
    }
    const example = MARKER.exec(lines[before] ?? "")?.[1];
    found.push({ example, line: i + 1, text: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return found;
}

it("every code block of docs/integration.md is an example file, verbatim", async () => {
  const all = blocks(await readFile(GUIDE, "utf8"));
  assert.ok(all.length >= 10, `the guide has its snippets (${all.length})`);
  for (const block of all) {
    assert.ok(block.example, `docs/integration.md:${block.line}: a code block without <!-- example: … --> above it`);
    const file = path.join(PACKAGE_DIR, block.example);
    assert.ok(file.startsWith(`${PACKAGE_DIR}${path.sep}examples${path.sep}`), `${block.example} is under examples/`);
    const source = (await readFile(file, "utf8")).replace(/\n$/, "");
    assert.ok(
      block.text === source,
      `docs/integration.md:${block.line} differs from clients/typescript/${block.example}: run \`npm run sync-guide\``,
    );
  }
});

const APP_DIR = path.join(PACKAGE_DIR, "examples/nextjs");

/** The Next.js example's source files (`app/`, `lib/`), relative to the app. */
async function appSources(): Promise<string[]> {
  const found: string[] = [];
  for (const top of ["app", "lib"]) {
    for (const entry of await readdir(path.join(APP_DIR, top), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && /\.tsx?$/.test(entry.name)) {
        found.push(path.relative(APP_DIR, path.join(entry.parentPath, entry.name)));
      }
    }
  }
  return found.sort();
}

it("shows every file of the Next.js example, each naming its own path first", async () => {
  const shown = new Set(blocks(await readFile(GUIDE, "utf8")).map((b) => b.example));
  const sources = await appSources();
  assert.ok(sources.length >= 15, `the app's files (${sources.length})`);
  for (const source of sources) {
    assert.ok(shown.has(`examples/nextjs/${source}`), `docs/integration.md shows examples/nextjs/${source}`);
    const first = (await readFile(path.join(APP_DIR, source), "utf8")).split("\n")[0] ?? "";
    assert.ok(first.startsWith(`// ${source}`), `examples/nextjs/${source} begins with "// ${source}": ${first}`);
  }
});
