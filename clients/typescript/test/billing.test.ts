/**
 * The client's billing calls against a real `tally serve`: checkout with return addresses, as the
 * user (host token) and by the backend's API key naming the user; orders; subscriptions listed,
 * cancelled at the period's end, resumed, switched at the period's end and the switch withdrawn;
 * a customer-portal link that works once. These need the API's billing scopes, return URLs and
 * portal sessions (`billing:read`/`billing:write`, `[hostApp] returnOrigins`,
 * `POST /api/portal-sessions`).
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { createTallyClient, isTallyError, type TallyClient } from "@tally/client";

import type { AppUser } from "../examples/nextjs/lib/tally.ts";
import { operatorSetup } from "./support/setup.js";
import { eventually, PACKAGE_DIR, sandboxPay, startTally, type TallyServer } from "./support/tally.js";

const APP = "https://app.example.com";
let server: TallyServer;
let lib: typeof import("../examples/nextjs/lib/tally.ts");

before(async () => {
  const hostApp = await readFile(path.join(PACKAGE_DIR, "examples/tally-host-app.toml"), "utf8");
  server = await startTally(hostApp);
  await operatorSetup(server);
  process.env.APP_URL = APP;
  lib = await import("../examples/nextjs/lib/tally.ts");
});

after(async () => {
  await server?.stop();
});

function appUser(name: string): AppUser {
  return { id: `billing-${name}`, email: `${name}@example.com`, name };
}

/** Buy `planId` for `user` by card through the sandbox; the paid order's id. */
async function buy(client: TallyClient, planId: string, userId?: string): Promise<string> {
  const order = await client.initiatePayment({
    planId,
    provider: "card_gateway",
    successUrl: `${APP}/checkout/success`,
    cancelUrl: `${APP}/checkout/cancelled`,
    userId,
  });
  await sandboxPay(server, order.orderId);
  await eventually(`${planId} paid`, async () => {
    const paid = await client.getOrder(order.orderId, { userId });
    return paid.status === "paid" ? paid : undefined;
  });
  return order.orderId;
}

describe("checkout with return addresses", () => {
  it("starts a checkout as the user and reads the order back, as the user and by the key", async () => {
    const ada = appUser("ada");
    const orderId = await buy(lib.tallyAs(ada), "credits_card_500");
    const userId = await lib.tallyUserId(ada);
    assert.equal((await lib.tally().getOrder(orderId, { userId })).status, "paid");
    const page = await lib.tally().listOrders({ userId, limit: 5 });
    assert.deepEqual(
      page.items.map((o) => o.orderId),
      [orderId],
    );
  });

  it("lets the backend start a checkout for a user it names, with the buyer's e-mail", async () => {
    const bea = appUser("bea");
    const userId = await lib.tallyUserId(bea);
    const order = await lib.tally().initiatePayment({
      planId: "credits_card_500",
      provider: "card_gateway",
      userId,
      customerEmail: "bea@example.com",
      successUrl: `${APP}/checkout/success`,
    });
    assert.equal(order.status, "pending");
    const own = await lib.tallyAs(bea).listOrders();
    assert.ok(own.items.some((o) => o.orderId === order.orderId), "the order is the user's");
  });

  it("refuses a return address outside the allowed origins, naming the field, writing nothing", async () => {
    const cy = appUser("cy");
    const client = lib.tallyAs(cy);
    await assert.rejects(
      client.initiatePayment({ planId: "credits_card_500", provider: "card_gateway", successUrl: "https://evil.example.net/x" }),
      (e: unknown) => isTallyError(e, "return_url_not_allowed") && e.status === 422 && e.detail.includes("successUrl"),
    );
    assert.equal((await client.listOrders()).items.length, 0);
  });
});

describe("subscriptions", () => {
  it("lists, cancels at the period's end, resumes, schedules a switch and withdraws it", async () => {
    const dee = appUser("dee");
    const client = lib.tallyAs(dee);
    await buy(client, "pro_monthly");
    const userId = await lib.tallyUserId(dee);
    const { items } = await lib.tally().listSubscriptions({ userId });
    const subscription = items[0];
    assert.ok(subscription, "the new subscription");
    assert.equal(subscription.planId, "pro_monthly");
    assert.deepEqual((await client.listSubscriptions()).items.map((s) => s.id), [subscription.id]);

    const cancelled = await client.cancelSubscription(subscription.id);
    assert.equal(cancelled.cancelAtPeriodEnd, true);
    const resumed = await lib.tally().resumeSubscription(subscription.id, { userId });
    assert.equal(resumed.cancelAtPeriodEnd, false);

    const switched = await client.changePlan(subscription.id, { planId: "pro_yearly", when: "period_end" });
    assert.equal(switched.subscription.scheduledPlanId, "pro_yearly");
    const withdrawn = await client.withdrawScheduledPlan(subscription.id);
    assert.equal(withdrawn.scheduledPlanId, undefined);

    const other = lib.tallyAs(appUser("eve"));
    await assert.rejects(other.cancelSubscription(subscription.id), (e: unknown) => isTallyError(e) && e.status === 403);
    await assert.rejects(
      lib.tally().cancelSubscription(subscription.id),
      (e: unknown) => isTallyError(e, "validation_failed") && e.status === 400,
      "a key must name the user",
    );
  });
});

describe("the customer portal", () => {
  it("makes a single-use link that opens the user's dashboard", async () => {
    const fay = appUser("fay");
    const userId = await lib.tallyUserId(fay);
    const portal = await lib.tally().createPortalSession({ userId, returnUrl: `${APP}/account`, locale: "en" });
    assert.ok(portal.url.startsWith(`${server.url}/portal/`), portal.url);
    assert.ok(Date.parse(portal.expiresAt) > Date.now());
    const opened = await fetch(portal.url, { redirect: "manual" });
    assert.ok(opened.status >= 300 && opened.status < 400, `redirects: ${opened.status}`);
    assert.match(opened.headers.get("location") ?? "", /\/dashboard/);
    assert.equal((await fetch(portal.url, { redirect: "manual" })).status, 410, "used once");

    await assert.rejects(
      lib.tally().createPortalSession({ userId, returnUrl: "https://evil.example.net/" }),
      (e: unknown) => isTallyError(e, "return_url_not_allowed") && e.status === 422,
    );
    const asUser = createTallyClient({ baseUrl: server.url, hostToken: () => lib.hostToken(fay) });
    await assert.rejects(asUser.createPortalSession({ userId, returnUrl: `${APP}/account` }), (e: unknown) => isTallyError(e) && e.status === 403);
  });

  it("makes a link to the billing of a team the user manages, and of no other", async () => {
    const backend = lib.tally();
    const owner = await lib.tallyUserId(appUser("gus"));
    const outsider = await lib.tallyUserId(appUser("hal"));
    const team = await backend.accounts.createTeam("Gus & co", { userId: owner });
    const portal = await backend.createPortalSession({ userId: owner, accountId: team.id, returnUrl: `${APP}/team` });
    const opened = await fetch(portal.url, { redirect: "manual" });
    const session = (opened.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    assert.match(session, /^tally_session=/);
    const held = await fetch(`${server.url}/api/entitlements`, { headers: { cookie: session } });
    assert.equal(((await held.json()) as { accountId?: string }).accountId, team.id, "the team's entitlements");
    await assert.rejects(
      backend.createPortalSession({ userId: outsider, accountId: team.id, returnUrl: `${APP}/team` }),
      (e: unknown) => isTallyError(e, "account_not_found") && e.status === 404,
    );
  });
});
