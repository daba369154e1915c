/**
 * The operator's side, done as the guide says: the administrator from
 * `examples/operator/create-admin.sh`, a session from `sign-in.sh`, the backend's API key from
 * `create-api-key.sh`; then the environment the examples read (`TALLY_URL`, `TALLY_API_KEY`,
 * `TALLY_HOST_JWT_SECRET`).
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

import { ADMIN, HOST_JWT_SECRET, PACKAGE_DIR, type TallyServer, tallyBinary } from "./tally.js";

const run = promisify(execFile);

/** Run `examples/operator/<script>` with bash in the server's directory, as an operator would. */
export async function operator(server: TallyServer, script: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const { stdout } = await run("bash", ["-euo", "pipefail", path.join(PACKAGE_DIR, "examples/operator", script)], {
    cwd: server.dir,
    env: {
      ...server.env,
      PATH: `${path.dirname(tallyBinary())}${path.delimiter}${process.env.PATH ?? ""}`,
      TALLY_URL: server.url,
      TALLY_PASSWORD: ADMIN.password,
      ...env,
    },
  });
  return stdout;
}

/** The API key the operator scripts create, and the examples' environment set from it. */
export async function operatorSetup(server: TallyServer): Promise<{ apiKey: string }> {
  await operator(server, "create-admin.sh");
  await operator(server, "sign-in.sh");
  const created = JSON.parse(await operator(server, "create-api-key.sh")) as { secret: string; scopes: string[] };
  process.env.TALLY_URL = server.url;
  process.env.TALLY_API_KEY = created.secret;
  process.env.TALLY_HOST_JWT_SECRET = HOST_JWT_SECRET;
  return { apiKey: created.secret };
}
