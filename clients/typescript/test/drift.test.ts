/**
 * The committed types (`src/openapi.ts`) are what `npm run generate` makes of
 * `docs/openapi.json` now: regenerate with the same command into a temporary file and compare.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { it } from "node:test";
import { promisify } from "node:util";

import { PACKAGE_DIR } from "./support/tally.js";

const run = promisify(execFile);
const COMMITTED = "src/openapi.ts";

it("src/openapi.ts matches docs/openapi.json (run `npm run generate` after changing the API)", async () => {
  const manifest = JSON.parse(await readFile(path.join(PACKAGE_DIR, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  };
  const generate = manifest.scripts.generate ?? "";
  assert.ok(generate.includes(`--output ${COMMITTED}`), `the generate script writes ${COMMITTED}`);
  const dir = await mkdtemp(path.join(tmpdir(), "tally-drift-"));
  try {
    const fresh = path.join(dir, "openapi.ts");
    const command = generate.replace(`--output ${COMMITTED}`, `--output ${JSON.stringify(fresh)}`);
    await run("sh", ["-c", command], {
      cwd: PACKAGE_DIR,
      env: { ...process.env, PATH: `${path.join(PACKAGE_DIR, "node_modules/.bin")}${path.delimiter}${process.env.PATH ?? ""}` },
    });
    const [expected, committed] = await Promise.all([readFile(fresh, "utf8"), readFile(path.join(PACKAGE_DIR, COMMITTED), "utf8")]);
    assert.ok(
      committed === expected,
      `${COMMITTED} lags docs/openapi.json: run \`npm run generate\` in clients/typescript and commit the result`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
