/**
 * A real `tally serve` for the client's tests: the workspace's debug binary, on a free port
 * (`BIND_ADDR=127.0.0.1:0`, the address read back from its JSON log), SQLite and the provider
 * sandbox in a temporary directory, and the guide's `examples/tally.toml` and
 * `examples/tally-events.toml` as its settings.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** `clients/typescript`. */
export const PACKAGE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** The workspace root. */
export const REPO_DIR = path.resolve(PACKAGE_DIR, "../..");
/** The host-token secret the test server trusts (HS256, 32+ bytes). */
export const HOST_JWT_SECRET = "test-host-secret-0123456789abcdef0123456789";
/** The administrator `examples/operator/create-admin.sh` creates. */
export const ADMIN = { email: "ops@example.com", password: "correct horse battery" } as const;

/** The binary the tests run: `TALLY_BIN`, else the workspace's debug build. */
export function tallyBinary(): string {
  return process.env.TALLY_BIN ?? path.join(REPO_DIR, "target/debug/tally");
}

/** A running `tally serve`. */
export interface TallyServer {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The temporary directory holding its database and settings. */
  readonly dir: string;
  /** The environment the server runs with (what an operator command needs too). */
  readonly env: NodeJS.ProcessEnv;
  /** Every log line so far (JSON). */
  readonly logs: string[];
  /** Stop it and remove its directory. */
  stop(): Promise<void>;
}

/** How long the server may take to say it is serving. */
const START_TIMEOUT_MS = 30_000;

/**
 * Start `tally serve` with the shipped catalog and the guide's settings (`extraToml` appended)
 * in `<dir>/config`, so that an operator command run in `<dir>` finds the same settings.
 */
export async function startTally(extraToml = ""): Promise<TallyServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "tally-client-"));
  const config = path.join(dir, "config");
  await mkdir(config);
  for (const file of ["payment.toml", "credits.toml"]) {
    await copyFile(path.join(REPO_DIR, "config", file), path.join(config, file));
  }
  const settings = await Promise.all(
    ["examples/tally.toml", "examples/tally-events.toml"].map((file) => readFile(path.join(PACKAGE_DIR, file), "utf8")),
  );
  await writeFile(path.join(config, "tally.toml"), [...settings, extraToml].join("\n"));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    BIND_ADDR: "127.0.0.1:0",
    DATABASE_URL: `sqlite://${dir}/tally.db`,
    LOG_FORMAT: "json",
    APP_ENV: "development",
    HOST_JWT_SECRET,
  };
  delete env.APP_BASE_URL;
  const child = spawn(tallyBinary(), ["serve", "--config", config], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  const logs: string[] = [];
  const stop = async (): Promise<void> => {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const url = await servingUrl(child, logs);
    return { url, dir, env, logs, stop };
  } catch (error) {
    await stop();
    throw new Error(`tally serve did not start: ${String(error)}\n${logs.join("\n")}`);
  }
}

/** The URL from the `tally is serving` log line. */
function servingUrl(child: ChildProcess, logs: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no 'tally is serving' line in time")), START_TIMEOUT_MS);
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) {
        continue;
      }
      createInterface({ input: stream }).on("line", (line) => {
        logs.push(line);
        const url = servingLine(line);
        if (url !== undefined) {
          clearTimeout(timer);
          resolve(url);
        }
      });
    }
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`tally exited with ${String(code)}`));
    });
  });
}

function servingLine(line: string): string | undefined {
  try {
    const entry = JSON.parse(line) as { message?: unknown; url?: unknown };
    return entry.message === "tally is serving" && typeof entry.url === "string" ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

/** The sandbox's record of the payment behind our order `orderId`. */
export async function sandboxPayment(server: TallyServer, orderId: string): Promise<{ id: string }> {
  const response = await fetch(`${server.url}/sandbox/api/payments?orderId=${encodeURIComponent(orderId)}`);
  const payments = (await response.json()) as { id: string }[];
  const payment = payments[0];
  if (payment === undefined) {
    throw new Error(`the sandbox has no payment for ${orderId}`);
  }
  return payment;
}

/** Press Pay (or `action`) on the sandbox's checkout of our order `orderId`, as the buyer would. */
export async function sandboxPay(server: TallyServer, orderId: string, action = "pay"): Promise<void> {
  const payment = await sandboxPayment(server, orderId);
  const response = await fetch(`${server.url}/sandbox/api/payments/${payment.id}/${action}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  if (!response.ok) {
    throw new Error(`sandbox ${action}: ${response.status} ${await response.text()}`);
  }
}

/** Poll `check` every 100 ms until it returns a value, for at most `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
