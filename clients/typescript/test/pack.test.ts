/**
 * The client installs like a package: `npm pack` makes a tarball with the built `dist/` (and
 * nothing of the sources or tests), which another project installs as a copy and imports, typed;
 * `npm install --install-links <path>` copies too. Neither leaves a link into this checkout.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { lstat, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";

import { PACKAGE_DIR } from "./support/tally.js";

const run = promisify(execFile);
let dir: string;

before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "tally-pack-"));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A fresh project in `dir/<name>` that imports the client in ES module code. */
async function project(name: string): Promise<string> {
  const root = path.join(dir, name);
  await run("mkdir", ["-p", root]);
  await writeFile(path.join(root, "package.json"), JSON.stringify({ name, private: true, type: "module" }));
  await writeFile(
    path.join(root, "use.ts"),
    'import { createTallyClient, type OfferList } from "@tally/client";\n' +
      'const client = createTallyClient({ baseUrl: "http://127.0.0.1:9" });\n' +
      "export const offers: () => Promise<OfferList> = () => client.offers();\n",
  );
  return root;
}

async function npm(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run("npm", [...args, "--no-audit", "--no-fund", "--prefer-offline"], { cwd });
  return stdout;
}

/** The installed client is a copy with its build, importable and typed. */
async function checkInstalled(root: string): Promise<void> {
  const installed = path.join(root, "node_modules/@tally/client");
  assert.ok(!(await lstat(installed)).isSymbolicLink(), "a copy, not a link into the checkout");
  await lstat(path.join(installed, "dist/index.d.ts"));
  const { stdout } = await run("node", ["--input-type=module", "-e", 'import("@tally/client").then((m) => console.log(typeof m.createTallyClient))'], {
    cwd: root,
  });
  assert.equal(stdout.trim(), "function");
  const tsc = path.join(PACKAGE_DIR, "node_modules/.bin/tsc");
  await run(tsc, ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", "use.ts"], { cwd: root });
}

it("packs a tarball of the built client that another project installs and type-checks against", async () => {
  const packed = JSON.parse(await npm(PACKAGE_DIR, "pack", "--json", "--pack-destination", dir)) as {
    filename: string;
    files: { path: string }[];
  }[];
  const tarball = packed[0];
  assert.ok(tarball, "npm pack made a tarball");
  const files = tarball.files.map((f) => f.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), files.join());
  assert.ok(files.every((f) => f === "package.json" || f === "README.md" || f.startsWith("dist/")), files.join());
  const root = await project("from-tarball");
  await npm(root, "install", path.join(dir, tarball.filename));
  await checkInstalled(root);
});

it("installs from the path as a copy with --install-links", async () => {
  const root = await project("from-path");
  await npm(root, "install", "--install-links", PACKAGE_DIR);
  await checkInstalled(root);
});
