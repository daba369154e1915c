/**
 * `npm run e2e:nextjs`: the Next.js example (`examples/nextjs`) end to end against a real
 * `tally serve`, as a buyer would use it in Chromium: `npm ci` and `next build` the app, start
 * Tally (SQLite, the provider sandbox, the guide's settings plus `[hostApp] returnOrigins` = the
 * app's origin) and `next start`, then sign in, pay a subscription through the sandbox and land
 * back on the app's page, cancel a checkout and land back, open the billing portal, and cancel
 * the subscription. Each step prints `ok <step>`; the first failure stops the run (exit 1).
 *
 * Needs the `tally` binary (`TALLY_BIN`, else the workspace's debug build), the client's `dist/`
 * (`npm run build`) and Chromium (`CHROMIUM`, else /usr/bin/chromium).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";

import puppeteer, { type Browser, type Page } from "puppeteer-core";

import { operator } from "../test/support/setup.js";
import { PACKAGE_DIR, startTally, type TallyServer } from "../test/support/tally.js";

const APP_DIR = path.join(PACKAGE_DIR, "examples/nextjs");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
/** How long one step may wait for a page, in milliseconds. */
const STEP_TIMEOUT_MS = 30_000;
const BUYER = "ada@example.com";

const started = Date.now();
const children: ChildProcess[] = [];
let tally: TallyServer | undefined;
let browser: Browser | undefined;

function ok(step: string): void {
  console.log(`ok ${step} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv = {}): void {
  execFileSync(command, args, { cwd: APP_DIR, stdio: "inherit", env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", ...env } });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** `next start` on `port` with the app's settings; resolves once it answers. */
async function startApp(port: number, env: NodeJS.ProcessEnv): Promise<void> {
  const next = path.join(APP_DIR, "node_modules/.bin/next");
  const child = spawn(next, ["start", "-p", String(port), "-H", "127.0.0.1"], {
    cwd: APP_DIR,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", ...env },
    stdio: ["ignore", "inherit", "inherit"],
  });
  children.push(child);
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`next start exited with ${child.exitCode}`);
    const answered = await fetch(`http://127.0.0.1:${port}/sign-in`).then((r) => r.ok, () => false);
    if (answered) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error("next start did not answer in time");
}

/** Wait until the page is at an address starting with `prefix` and shows `selector`. */
async function arrive(page: Page, prefix: string, selector: string): Promise<void> {
  await page.waitForFunction((p: string) => location.href.startsWith(p), { timeout: STEP_TIMEOUT_MS }, prefix);
  await page.waitForSelector(selector, { timeout: STEP_TIMEOUT_MS });
}

/** Press the button `selector` (what follows is awaited by the next step, by address or content). */
async function press(page: Page, selector: string): Promise<void> {
  await page.waitForSelector(selector, { timeout: STEP_TIMEOUT_MS });
  await page.click(selector);
}

/** On the sandbox's hosted checkout, press `label` (Pay, Decline, Cancel). */
async function sandboxCheckout(page: Page, tallyUrl: string, label: string): Promise<void> {
  await page.waitForFunction((p: string) => location.href.startsWith(`${p}/sandbox/`), { timeout: STEP_TIMEOUT_MS }, tallyUrl);
  const action = label.toLowerCase();
  await press(page, `form[action$="/${action}"] button`);
}

async function main(): Promise<void> {
  execFileSync("npm", ["run", "build"], { cwd: PACKAGE_DIR, stdio: "inherit" });
  run("npm", ["ci", "--no-audit", "--no-fund"]);
  ok("npm ci");
  run("npx", ["next", "build"]);
  ok("next build");

  const port = await freePort();
  const appUrl = `http://127.0.0.1:${port}`;
  const hostApp = await readFile(path.join(PACKAGE_DIR, "examples/tally-host-app.toml"), "utf8");
  tally = await startTally(hostApp.replace("https://app.example.com", appUrl));
  await operator(tally, "create-admin.sh");
  await operator(tally, "sign-in.sh");
  const key = JSON.parse(await operator(tally, "create-api-key.sh")) as { secret: string };
  const endpoint = JSON.parse(await operator(tally, "create-webhook-endpoint.sh", { APP_URL: appUrl })) as { secret: string };
  ok("tally serve, the operator's API key and event endpoint");

  await startApp(port, {
    APP_URL: appUrl,
    APP_SESSION_SECRET: "e2e-session-secret-0123456789abcdef0123",
    TALLY_URL: tally.url,
    TALLY_API_KEY: key.secret,
    TALLY_HOST_JWT_SECRET: tally.env.HOST_JWT_SECRET ?? "",
    TALLY_WEBHOOK_SECRET: endpoint.secret,
  });
  ok("next start");

  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);

  await page.goto(`${appUrl}/sign-in`);
  await page.type("input[name=email]", BUYER);
  await press(page, "button[type=submit]");
  await arrive(page, `${appUrl}/pricing`, '[data-testid="buy-pro_monthly"]');
  ok("signed in; the pricing page shows the offers");

  await press(page, '[data-testid="buy-pro_monthly"]');
  await sandboxCheckout(page, tally.url, "Pay");
  await arrive(page, `${appUrl}/checkout/success`, '[data-testid="order-status"]');
  const status = await page.$eval('[data-testid="order-status"]', (e) => e.textContent);
  if (status !== "Thank you!") throw new Error(`the success page says ${status}`);
  ok("paid through the sandbox and landed back on the app's success page");

  await page.goto(`${appUrl}/pricing`);
  await press(page, '[data-testid="buy-credits_card_500"]');
  await sandboxCheckout(page, tally.url, "Cancel");
  await arrive(page, `${appUrl}/checkout/cancelled`, '[data-testid="checkout-cancelled"]');
  ok("cancelled a checkout and landed back on the app's page");

  await page.goto(`${appUrl}/account`);
  await press(page, '[data-testid="billing-portal"]');
  await page.waitForFunction((p: string) => location.href.startsWith(`${p}/`), { timeout: STEP_TIMEOUT_MS }, tally.url);
  const back = await page.waitForSelector('[data-testid="portal-back"]', { timeout: STEP_TIMEOUT_MS });
  const backTo = await back?.evaluate((a) => a.getAttribute("href"));
  if (!backTo?.startsWith(`${appUrl}/account`)) throw new Error(`the portal links back to ${backTo}`);
  if (!page.url().startsWith(`${tally.url}/dashboard`)) throw new Error(`the portal opened ${page.url()}`);
  ok("opened the billing portal (Tally's dashboard, with a link back to the app)");

  await page.goto(`${appUrl}/account`);
  await press(page, '[data-testid="cancel-subscription"]');
  await page.waitForFunction(
    () => document.querySelector('[data-testid="subscription-pro_monthly"]')?.textContent?.includes(", ends ") ?? false,
    { timeout: STEP_TIMEOUT_MS },
  );
  ok("cancelled the subscription at the end of its period");
}

async function stop(): Promise<void> {
  await browser?.close().catch(() => undefined);
  for (const child of children) child.kill("SIGTERM");
  await tally?.stop();
}

try {
  await main();
  console.log(`nextjs e2e: all steps passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(`nextjs e2e failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  if (tally !== undefined) console.error(tally.logs.slice(-30).join("\n"));
  process.exitCode = 1;
} finally {
  await stop();
}
