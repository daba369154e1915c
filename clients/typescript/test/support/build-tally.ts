/**
 * Before the tests: make sure the `tally` binary is built. It is built the way `cargo test
 * --workspace` builds it (`cargo test --workspace --no-run`, a no-op after that run or
 * `.ci/reliability`): `cargo build -p bootstrap` resolves features for one package and would
 * rebuild much of the dependency tree. `TALLY_BIN`
 * names a binary to use instead. With `CI=true` a failed build fails the run; on a developer's
 * machine a stale binary is used with a warning (another change in the workspace may not build).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

import { REPO_DIR, tallyBinary } from "./tally.js";

const binary = tallyBinary();
if (process.env.TALLY_BIN !== undefined) {
  if (!existsSync(binary)) {
    console.error(`TALLY_BIN=${binary} does not exist`);
    process.exit(1);
  }
  process.exit(0);
}
const build = spawnSync("cargo", ["test", "--workspace", "--no-run"], { cwd: REPO_DIR, stdio: "inherit" });
if (build.status === 0) {
  process.exit(0);
}
if (process.env.CI !== "true" && existsSync(binary)) {
  console.warn(`warning: cargo build failed; testing the existing ${binary}`);
  process.exit(0);
}
console.error("error: could not build the tally binary the client's tests run against");
process.exit(1);
