/**
 * The client and the guide's examples against a real `tally serve` (SQLite, provider sandbox):
 * the operator's API key, plans, host-token users, a credits pack bought through the sandbox,
 * spends with idempotency keys, reserve → settle/release around a streamed AI SDK completion,
 * problem errors, and a refund.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { createTallyClient, isTallyError, limitReached, TallyError, type TallyClient } from "@tally/client";
import { simulateReadableStream } from "ai";
import { SignJWT } from "jose";
import { MockLanguageModelV3 } from "ai/test";

import type { AppUser } from "../examples/nextjs/lib/tally.ts";
import { operator, operatorSetup } from "./support/setup.js";
import { ADMIN, eventually, HOST_JWT_SECRET, sandboxPay, startTally, type TallyServer } from "./support/tally.js";

let server: TallyServer;
let app: Server;
let endpointId: string;
let examples: {
  lib: typeof import("../examples/nextjs/lib/tally.ts");
  account: typeof import("../examples/nextjs/lib/account.ts");
  spend: typeof import("../examples/nextjs/lib/spend.ts");
  chat: typeof import("../examples/nextjs/lib/chat.ts");
  route: typeof import("../examples/nextjs/app/api/tally/events/route.ts");
  replay: typeof import("../examples/nextjs/lib/catch-up.ts");
  db: typeof import("../examples/nextjs/lib/db.ts");
};

/** One of the host app's users, as its sign-in knows them. */
function appUser(name: string): AppUser {
  return { id: `app-user-${name}`, email: `${name}@example.com` };
}

before(async () => {
  server = await startTally();
  await operatorSetup(server);
  // The Next.js example's server modules, as its routes and pages call them.
  examples = {
    lib: await import("../examples/nextjs/lib/tally.ts"),
    account: await import("../examples/nextjs/lib/account.ts"),
    spend: await import("../examples/nextjs/lib/spend.ts"),
    chat: await import("../examples/nextjs/lib/chat.ts"),
    route: await import("../examples/nextjs/app/api/tally/events/route.ts"),
    replay: await import("../examples/nextjs/lib/catch-up.ts"),
    db: await import("../examples/nextjs/lib/db.ts"),
  };
  // The host app: the guide's event route behind a plain Node server, registered as the
  // operator's script does; Tally delivers to it from here on.
  app = await serveRoute(examples.route.POST);
  const created = JSON.parse(
    await operator(server, "create-webhook-endpoint.sh", { APP_URL: `http://127.0.0.1:${(app.address() as AddressInfo).port}` }),
  ) as { id: string; secret: string };
  assert.match(created.secret, /^whsec_/);
  endpointId = created.id;
  process.env.TALLY_WEBHOOK_SECRET = created.secret;
});

after(async () => {
  await new Promise((resolve) => (app ? app.close(resolve) : resolve(undefined)));
  await server?.stop();
});

/** A Node HTTP server handing each request to a Fetch-style route handler, as Next.js does. */
async function serveRoute(handler: (request: Request) => Promise<Response>): Promise<Server> {
  const listening = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === "string") headers.set(name, value);
      }
      const request = new Request(`http://app.test${req.url ?? "/"}`, { method: req.method, headers, body: Buffer.concat(chunks) });
      handler(request)
        .then(async (response) => {
          res.writeHead(response.status);
          res.end(Buffer.from(await response.arrayBuffer()));
        })
        .catch((error: unknown) => {
          res.writeHead(500);
          res.end(String(error));
        });
    });
  });
  await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
  return listening;
}

/** Buy the 500-credit pack for `name` through the sandboxed card gateway; returns the order id. */
async function buyCredits(name: string): Promise<string> {
  const orderId = await buy(name, "credits_card_500");
  await eventually("the pack's credits", async () => {
    const summary = await examples.account.accountSummary(appUser(name));
    return summary.creditsHundredths >= 50_000 ? summary : undefined;
  });
  return orderId;
}

/** Buy `planId` for `name` through the sandboxed card gateway and wait until it is paid. */
async function buy(name: string, planId: string): Promise<string> {
  const buyer = examples.lib.tallyAs(appUser(name));
  const order = await buyer.initiatePayment({ planId, provider: "card_gateway" });
  assert.ok(order.paymentUrl, "a checkout page");
  const opened = await fetch(order.paymentUrl, { redirect: "manual" });
  assert.ok(opened.status < 400, `the checkout page opens: ${opened.status}`);
  await sandboxPay(server, order.orderId);
  await eventually(`${planId} paid`, async () => {
    const paid = await buyer.getOrder(order.orderId);
    return paid.status === "paid" ? paid : undefined;
  });
  return order.orderId;
}

function balanceOf(userId: string): Promise<number> {
  return examples.lib.tally().credits.balance({ userId }).then((b) => b.balanceHundredths);
}

/** A model that streams `text` and reports `input` + `output` tokens, or fails mid-stream. */
function mockModel(outcome: { input: number; output: number } | "fail"): MockLanguageModelV3 {
  const usage =
    outcome === "fail"
      ? undefined
      : {
          inputTokens: { total: outcome.input, noCache: outcome.input, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: outcome.output, text: outcome.output, reasoning: 0 },
        };
  const ending =
    usage === undefined
      ? [{ type: "error" as const, error: new Error("the provider hung up") }]
      : [
          { type: "text-end" as const, id: "t" },
          { type: "finish" as const, finishReason: { unified: "stop" as const, raw: "stop" }, usage },
        ];
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: "stream-start" as const, warnings: [] },
          { type: "text-start" as const, id: "t" },
          { type: "text-delta" as const, id: "t", delta: "Hello, " },
          { type: "text-delta" as const, id: "t", delta: "world." },
          ...ending,
        ],
      }),
    }),
  });
}


let signedIn: Promise<TallyClient> | undefined;

/** The administrator's client, signed in once for the whole run (sign-ins are rate-limited). */
function administrator(): Promise<TallyClient> {
  signedIn ??= (async () => {
    const anonymous = createTallyClient({ baseUrl: server.url });
    const { data: session } = await anonymous.raw.POST("/api/auth/login", {
      body: { email: ADMIN.email, password: ADMIN.password },
    });
    assert.ok(session, "the administrator signs in");
    return createTallyClient({ baseUrl: server.url, sessionToken: session.token });
  })();
  return signedIn;
}

describe("the operator's setup and the plans", () => {
  it("lists the plans without a credential", async () => {
    const anonymous = createTallyClient({ baseUrl: server.url });
    const plans = await anonymous.plans.list();
    const pack = plans.find((p) => p.id === "credits_card_500");
    assert.ok(pack, "the shipped credits pack is listed");
    assert.equal(pack.amountMinor, 499);
  });

  it("lists the offers grouped as /pricing, and what a user holds of them", async () => {
    const anonymous = createTallyClient({ baseUrl: server.url });
    const { offers, intervals, environment } = await anonymous.offers({ locale: "en" });
    assert.equal(environment, "development");
    assert.ok(intervals.includes("month") && intervals.includes("year"), intervals.join());
    const pro = offers.find((o) => o.key === "group-pro" && o.interval === "month");
    assert.ok(pro, "the pro offer, monthly");
    assert.deepEqual(
      pro.options.map((o) => [o.planId, o.provider]),
      [
        ["pro_monthly", "card_gateway"],
        ["pro_monthly_wallet_global", "wallet_global"],
      ],
    );
    assert.equal(pro.held, undefined, "nobody signed in");
    const yuan = await anonymous.offers({ currency: "CNY", interval: "lifetime" });
    const lifetime = yuan.offers.find((o) => o.key === "group-lifetime");
    const wallet = lifetime?.options.find((o) => o.provider === "wallet_qr");
    assert.deepEqual([wallet?.price.amount, wallet?.productionPrice.amount], ["0.01", "299.00"]);
    await assert.rejects(anonymous.offers({ interval: "weekly" }), (e: unknown) => isTallyError(e, "validation_failed") && e.status === 422);

    await buy("oli", "pro_monthly");
    const own = await examples.lib.tallyAs(appUser("oli")).offers({ interval: "month" });
    assert.equal(own.offers.find((o) => o.key === "group-pro")?.held, "current");
    const userId = await examples.lib.tallyUserId(appUser("oli"));
    const forUser = await examples.lib.tally().offers({ userId, interval: "month" });
    assert.equal(forUser.userId, userId);
    assert.equal(forUser.offers.find((o) => o.key === "group-pro")?.held, "current");
  });

  it("made a key that spends but is not an administrator", async () => {
    await assert.rejects(examples.lib.tally().admin.createApiKey({ name: "x", scopes: ["credits:read"] }), (e: unknown) => {
      assert.ok(e instanceof TallyError);
      assert.equal(e.status, 403);
      return true;
    });
  });
});

describe("users", () => {
  it("maps a host token's subject to one Tally user, never a password account", async () => {
    const first = await examples.lib.tallyUserId(appUser("ada"));
    assert.match(first, /^hst_/);
    const again = await examples.lib.tallyAs(appUser("ada")).me();
    assert.equal(again.id, first);
    assert.notEqual(await examples.lib.tallyUserId(appUser("bob")), first);
  });

  it("signs up with a password and reads its own credits with the session", async () => {
    const raw = createTallyClient({ baseUrl: server.url }).raw;
    const { data } = await raw.POST("/api/auth/register", {
      body: { email: "grace@example.com", password: "correct horse battery" },
    });
    assert.ok(data, "registered");
    const grace = createTallyClient({ baseUrl: server.url, sessionToken: data.token });
    assert.equal((await grace.me()).email, "grace@example.com");
    assert.equal((await grace.credits.balance()).balanceHundredths, 0);
  });

  it("refuses a host token signed with another secret as a typed 401", async () => {
    const otherSecret = new TextEncoder().encode("another-secret-0123456789abcdef0123456789");
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("app-user-ada")
      .setIssuer("https://app.example.com")
      .setAudience("tally")
      .setExpirationTime("5m")
      .sign(otherSecret);
    const forged = createTallyClient({ baseUrl: server.url, hostToken: token });
    await assert.rejects(forged.me(), (e: unknown) => isTallyError(e, "unauthorized") && e.status === 401);
  });
});

describe("buying and spending", () => {
  it("buys a credits pack through the sandbox and spends it once per idempotency key", async () => {
    await buyCredits("carol");
    const userId = await examples.lib.tallyUserId(appUser("carol"));
    assert.equal(await balanceOf(userId), 50_000);

    const first = await examples.spend.chargeImage(appUser("carol"), "job-1");
    assert.equal(first.status, 200);
    assert.deepEqual(await first.json(), { balance: "495.00", replayed: false });
    const retry = await examples.spend.chargeImage(appUser("carol"), "job-1");
    assert.deepEqual(await retry.json(), { balance: "495.00", replayed: true });
    assert.equal(await balanceOf(userId), 49_500, "the same key spent once");

    const tokens = await examples.spend.chargeTokens(appUser("carol"), "req-1", "gpt-4o", 2_000);
    assert.equal(tokens.costHundredths, 200, "2000 tokens at 0.5 per 1000, gpt-4o multiplier 2");
    assert.equal(tokens.idempotencyKey, "tokens:req-1");
    assert.equal(await balanceOf(userId), 49_300);
  });

  it("gives every spend a fresh key by default and reuses it when it retries", async () => {
    await buyCredits("dan");
    const userId = await examples.lib.tallyUserId(appUser("dan"));
    const keys: string[] = [];
    let dropped = false;
    // The first answer is lost after Tally committed (a dropped connection): the retry must
    // carry the same key and get the first outcome back.
    const flaky = createTallyClient({
      baseUrl: server.url,
      apiKey: process.env.TALLY_API_KEY ?? "",
      retry: { backoffMs: 10 },
      fetch: async (input, init) => {
        const request = new Request(input, init);
        keys.push(request.headers.get("idempotency-key") ?? "");
        const response = await fetch(request);
        if (!dropped) {
          dropped = true;
          throw new TypeError("fetch failed");
        }
        return response;
      },
    });
    const spent = await flaky.credits.consume({ userId, feature: "chat" });
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
    assert.match(spent.idempotencyKey, /^[0-9a-f-]{36}$/);
    assert.equal(spent.idempotencyKey, keys[0]);
    assert.equal(spent.replayed, true);
    assert.equal(await balanceOf(userId), 49_900, "one chat (1 credit) spent once");

    const other = await examples.lib.tally().credits.consume({ userId, feature: "chat" });
    assert.notEqual(other.idempotencyKey, spent.idempotencyKey);
    assert.equal(other.replayed, false);
    assert.equal(await balanceOf(userId), 49_800);
  });

  it("answers 402 with what was missing, spending nothing", async () => {
    const userId = await examples.lib.tallyUserId(appUser("erin"));
    const refused = await examples.spend.chargeImage(appUser("erin"), "job-2");
    assert.equal(refused.status, 402);
    assert.deepEqual(await refused.json(), { needed: "5.00", available: "0.00" });
    assert.equal(await balanceOf(userId), 0);
  });

  it("throws problem JSON as a typed TallyError", async () => {
    const error = await examples.lib.tally().credits
      .consume({ userId: "usr_nobody", feature: "image" })
      .then(() => assert.fail("consumed for nobody"))
      .catch((e: unknown) => e);
    assert.ok(error instanceof TallyError);
    assert.equal(error.status, 404);
    assert.equal(error.code, "user_not_found");
    assert.equal(error.type, "urn:tally:problem:user_not_found");
    assert.ok(error.title.length > 0 && error.detail.length > 0);
    assert.ok(error.requestId, "the answer's X-Request-Id");

    const invalid = await examples.lib.tally().credits
      .consume({ userId: await examples.lib.tallyUserId(appUser("erin")), tokens: 0 })
      .catch((e: unknown) => e);
    assert.ok(isTallyError(invalid, "validation_failed"), String(invalid));
    assert.equal(invalid.status, 400);
  });
});

describe("teams", () => {
  it("creates a team, adds a member with a daily limit, and spends its pool until the limit refuses", async () => {
    const backend = examples.lib.tally();
    const owner = await examples.lib.tallyUserId(appUser("tess"));
    const member = await examples.lib.tallyUserId(appUser("milo"));
    const team = await backend.accounts.createTeam("Tess & co", { userId: owner });
    assert.match(team.id, /^team_/);
    assert.equal(team.role, "owner");
    const added = await backend.accounts.addMember(
      team.id,
      { memberId: member, limit: { credits: "6", window: "day" } },
      { userId: owner },
    );
    assert.equal(added.role, "member");
    assert.equal(added.limit?.creditsHundredths, 600);

    // An administrator funds the pool.
    const admin = await administrator();
    await admin.admin.adjustAccountCredits(team.id, { amount: "50", reason: "team pool" });

    // "image" costs 5 credits: the first fits the member's 6, the second does not.
    const spent = await backend.credits.consume({ userId: member, accountId: team.id, feature: "image" });
    assert.equal(spent.accountId, team.id);
    assert.equal(spent.userId, member);
    const refused = await backend.credits
      .consume({ userId: member, accountId: team.id, feature: "image" })
      .then(() => undefined, (error: unknown) => error);
    const limit = limitReached(refused);
    assert.ok(limit, `a limit_reached error: ${String(refused)}`);
    assert.equal(limit.leftHundredths, 100);
    assert.equal(limit.window, "day");
    assert.equal((await backend.credits.balance({ userId: member, accountId: team.id })).balanceHundredths, 4_500);

    const members = await backend.accounts.members(team.id, { userId: owner });
    assert.deepEqual(
      members.map((m) => [m.memberId, m.role, m.limit?.usedHundredths]),
      [
        [owner, "owner", undefined],
        [member, "member", 500],
      ],
    );
    const lifted = await backend.accounts.updateMember(team.id, member, { limit: null }, { userId: owner });
    assert.equal(lifted.limit, undefined);
    await backend.credits.consume({ userId: member, accountId: team.id, feature: "image" });
    await backend.accounts.removeMember(team.id, member, { userId: member });
    const accounts = await backend.accounts.list({ userId: member });
    assert.deepEqual(
      accounts.map((a) => a.kind),
      ["personal"],
      "the member left",
    );
    const outsider = await backend.credits
      .consume({ userId: member, accountId: team.id, feature: "image" })
      .then(() => undefined, (error: unknown) => error);
    assert.ok(isTallyError(outsider, "not_a_member"));
  });

  it("invites an address; the invitee accepts once with a token whose host verified it", async () => {
    const backend = examples.lib.tally();
    const owner = await examples.lib.tallyUserId(appUser("ines"));
    const team = await backend.accounts.createTeam("Ines & co", { userId: owner });
    const created = await backend.accounts.invite(
      team.id,
      { email: "jude@example.com", role: "admin", limit: { credits: "4", window: "week" } },
      { userId: owner },
    );
    assert.match(created.token, /^tinv_/);
    assert.deepEqual(
      (await backend.accounts.invitations(team.id, { userId: owner })).map((i) => [i.email, i.role]),
      [["jude@example.com", "admin"]],
    );
    const secret = new TextEncoder().encode(HOST_JWT_SECRET);
    const token = await new SignJWT({ email: "jude@example.com", email_verified: true })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("app-user-jude")
      .setIssuer("https://app.example.com")
      .setAudience("tally")
      .setExpirationTime("5m")
      .sign(secret);
    const jude = createTallyClient({ baseUrl: server.url, hostToken: token });
    const joined = await jude.accounts.acceptInvitation(created.token);
    assert.equal(joined.accountId, team.id);
    assert.equal(joined.role, "admin");
    assert.equal(joined.limit?.creditsHundredths, 400);
    const again = await jude.accounts.acceptInvitation(created.token).catch((e: unknown) => e);
    assert.ok(isTallyError(again, "invitation_used"), String(again));
    assert.equal((await backend.accounts.invitations(team.id, { userId: owner })).length, 0);

    const second = await backend.accounts.invite(team.id, { email: "kai@example.com" }, { userId: owner });
    await backend.accounts.revokeInvitation(team.id, second.invitation.id, { userId: owner });
    const revoked = await jude.accounts.acceptInvitation(second.token).catch((e: unknown) => e);
    assert.ok(isTallyError(revoked, "invitation_revoked"), String(revoked));
  });

  it("the owner buys a credits pack for the team: its credits go to the team's pool", async () => {
    const backend = examples.lib.tally();
    const owner = await examples.lib.tallyUserId(appUser("oona"));
    const member = await examples.lib.tallyUserId(appUser("pim"));
    const team = await backend.accounts.createTeam("Oona & co", { userId: owner });
    await backend.accounts.addMember(team.id, { memberId: member }, { userId: owner });

    const own = (await backend.credits.balance({ userId: owner })).balanceHundredths;
    const buyer = examples.lib.tallyAs(appUser("oona"));
    const order = await buyer.initiatePayment({ planId: "credits_card_500", provider: "card_gateway", accountId: team.id });
    assert.equal(order.accountId, team.id);
    await sandboxPay(server, order.orderId);
    const pool = await eventually("the team's pool", async () => {
      const balance = await backend.credits.balance({ userId: member, accountId: team.id });
      return balance.balanceHundredths >= 50_000 ? balance : undefined;
    });
    assert.equal(pool.balanceHundredths, 50_000);
    assert.equal((await backend.credits.balance({ userId: owner })).balanceHundredths, own, "nothing to the buyer");
    const orders = await backend.listOrders({ userId: member, accountId: team.id });
    assert.deepEqual(
      orders.items.map((o) => [o.orderId, o.accountId]),
      [[order.orderId, team.id]],
    );

    // A plain member cannot buy for the team.
    const refused = await examples.lib
      .tallyAs(appUser("pim"))
      .initiatePayment({ planId: "credits_card_500", provider: "card_gateway", accountId: team.id })
      .then(() => undefined, (error: unknown) => error);
    assert.ok(isTallyError(refused, "not_billing_manager"), String(refused));
  });
});

describe("balance thresholds", () => {
  it("sets thresholds on a user's account and shows the balance below one after a spend", async () => {
    const backend = examples.lib.tally();
    const user = await examples.lib.tallyUserId(appUser("thea"));
    const admin = await administrator();
    await admin.admin.adjustAccountCredits(user, { amount: "40", reason: "thresholds" });

    const fixed = await backend.thresholds.create({ credits: "36" }, { userId: user });
    assert.equal(fixed.creditsHundredths, 3600);
    assert.equal(fixed.below, false);
    const share = await backend.thresholds.create({ percentOfGrant: 50 }, { userId: user });
    assert.equal(share.levelHundredths, 2000);
    // "image" costs 5 credits: 40 → 35, below 36 and not below 20.
    await backend.credits.consume({ userId: user, feature: "image" });
    assert.deepEqual(
      (await backend.thresholds.list({ userId: user })).map((t) => [t.id, t.below]),
      [
        [fixed.id, true],
        [share.id, false],
      ],
    );
    await backend.thresholds.remove(fixed.id, { userId: user });
    assert.deepEqual(
      (await backend.thresholds.list({ userId: user })).map((t) => t.id),
      [share.id],
    );
  });
});

describe("automatic top-up", () => {
  it("keeps the card of a pack bought with consent, sets the rule, and turns it off with the card", async () => {
    const backend = examples.lib.tally();
    const user = await examples.lib.tallyUserId(appUser("refill"));
    const buyer = examples.lib.tallyAs(appUser("refill"));
    const order = await buyer.initiatePayment({
      planId: "credits_card_500",
      provider: "card_gateway",
      saveForAutoTopUp: true,
    });
    assert.ok(order.paymentUrl, "a checkout page");
    await fetch(order.paymentUrl, { redirect: "manual" });
    await sandboxPay(server, order.orderId);
    const saved = await eventually("the saved card", async () => {
      const overview = await backend.autoTopUp.get({ userId: user });
      return overview.paymentMethods.length === 1 ? overview : undefined;
    });
    const card = saved.paymentMethods[0];
    assert.ok(card, "one saved card");
    assert.deepEqual([card.brand, card.last4, card.orderId], ["visa", "4242", order.orderId]);
    const set = await backend.autoTopUp.set(
      { enabled: true, threshold: "100", planId: "credits_card_500", maxPerMonth: 2 },
      { userId: user },
    );
    assert.equal(set.rule?.enabled, true);
    assert.equal(set.rule?.paymentMethod?.id, card.id);
    const admin = await administrator();
    assert.equal((await admin.admin.accountAutoTopUp(user)).rule?.threshold, "100.00");
    const removed = await backend.autoTopUp.removePaymentMethod(card.id, { userId: user });
    assert.equal(removed.rule?.disabledReason, "method_removed");
    assert.deepEqual(removed.paymentMethods, []);
  });
});

describe("promo codes", () => {
  it("an administrator's code is redeemed once by a host app's user, retries answering the same redemption", async () => {
    const backend = examples.lib.tally();
    const admin = await administrator();
    const code = await admin.admin.createPromoCode({ code: "ts-launch", credits: "12.5", maxRedemptions: 10 });
    assert.equal(code.code, "TS-LAUNCH");
    assert.equal(code.category, "promotional");
    const user = await examples.lib.tallyUserId(appUser("promo"));

    const first = await backend.credits.redeemPromoCode("Ts-Launch", { userId: user });
    assert.equal(first.creditsHundredths, 1250);
    assert.equal(first.replayed, false);
    const again = await backend.credits.redeemPromoCode("TS-LAUNCH", { userId: user });
    assert.equal(again.id, first.id);
    assert.equal(again.replayed, true);
    const refused = await backend.credits
      .redeemPromoCode("TS-LAUNCH", { userId: user, idempotencyKey: "second" })
      .then(() => undefined, (error: unknown) => error);
    assert.ok(isTallyError(refused, "promo_code_already_redeemed"), String(refused));
    assert.equal((await backend.credits.balance({ userId: user })).balanceHundredths, 1250);

    const off = await admin.admin.setPromoCodeActive(code.id, false);
    assert.equal(off.active, false);
    const detail = await admin.admin.promoCode(code.id);
    assert.equal(detail.code.redeemed, 1);
    assert.deepEqual(
      detail.redemptions.map((r) => r.userId),
      [user],
    );
    assert.ok((await admin.admin.promoCodes()).some((c) => c.id === code.id));
  });
});

describe("spend limits", () => {
  it("sets a daily limit on a user's account; the spend past it is a typed limit_reached naming it", async () => {
    const backend = examples.lib.tally();
    const user = await examples.lib.tallyUserId(appUser("lena"));
    const admin = await administrator();
    await admin.admin.adjustAccountCredits(user, { amount: "50", reason: "limits" });

    const limit = await backend.limits.create({ credits: "8", window: "day" }, { userId: user });
    assert.equal(limit.creditsHundredths, 800);
    assert.equal(limit.enforcement, "hard");
    // "image" costs 5 credits: the first fits the 8, the second does not.
    await backend.credits.consume({ userId: user, feature: "image" });
    const refused = await backend.credits
      .consume({ userId: user, feature: "image" })
      .then(() => undefined, (error: unknown) => error);
    const reached = limitReached(refused);
    assert.ok(reached, `a limit_reached error: ${String(refused)}`);
    assert.equal(reached.scope, "account");
    assert.equal(reached.id, limit.id);
    assert.equal(reached.leftHundredths, 300);
    assert.deepEqual(
      (await backend.limits.list({ userId: user })).map((l) => [l.id, l.usedHundredths]),
      [[limit.id, 500]],
    );
    await backend.limits.remove(limit.id, { userId: user });
    assert.deepEqual(await backend.limits.list({ userId: user }), []);
    await backend.credits.consume({ userId: user, feature: "image" });
  });

  it("caps one API key bound to the account, set by an operator; other keys spend on", async () => {
    const backend = examples.lib.tally();
    const user = await examples.lib.tallyUserId(appUser("kemal"));
    const admin = await administrator();
    await admin.admin.adjustAccountCredits(user, { amount: "50", reason: "key limits" });
    const agentKey = await admin.admin.createApiKey({ name: "agent", scopes: ["credits:consume"], accountId: user });
    const agent = createTallyClient({ baseUrl: server.url, apiKey: agentKey.secret });

    const limit = await admin.admin.addAccountLimit(user, { credits: "5", window: "day", apiKeyId: agentKey.id });
    assert.equal(limit.apiKeyId, agentKey.id);
    await agent.credits.consume({ userId: user, feature: "image" });
    const refused = await agent.credits
      .consume({ userId: user, feature: "image" })
      .then(() => undefined, (error: unknown) => error);
    const reached = limitReached(refused);
    assert.ok(reached, `a limit_reached error: ${String(refused)}`);
    assert.equal(reached.scope, "key");
    assert.equal(reached.apiKeyId, agentKey.id);
    // The app's own key is not capped by it.
    await backend.credits.consume({ userId: user, feature: "image" });
    assert.deepEqual(
      (await admin.admin.accountLimits(user)).map((l) => [l.id, l.usedHundredths]),
      [[limit.id, 500]],
    );
    await admin.admin.removeAccountLimit(user, limit.id);
    assert.deepEqual(await admin.admin.accountLimits(user), []);
  });
});

describe("reserve → settle/release around a streamed completion", () => {
  let userId: string;
  before(async () => {
    await buyCredits("faye");
    userId = await examples.lib.tallyUserId(appUser("faye"));
  });

  it("settles with the AI SDK's usage", async () => {
    const response = await examples.chat.chat(appUser("faye"), "chat-1", "Hi", mockModel({ input: 1_200, output: 800 }), "gpt-4o");
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "Hello, world.");
    const status = await eventually("the settlement", async () => {
      const s = await examples.lib.tally().credits.status({ userId });
      return s.pendingReservations.length === 0 ? s : undefined;
    });
    assert.equal(status.balanceHundredths, 50_000 - 200, "2000 tokens of gpt-4o: 2.00 credits");
    const history = await examples.lib.tally().credits.transactions({ userId, limit: 5 });
    assert.ok(history.items.some((t) => t.type === "reservation_settle"));
  });

  it("releases the hold when the stream fails", async () => {
    const before = await balanceOf(userId);
    const response = await examples.chat.chat(appUser("faye"), "chat-2", "Hi", mockModel("fail"), "gpt-4o");
    await response.text().catch(() => "");
    await eventually("the release", async () => {
      const s = await examples.lib.tally().credits.status({ userId });
      return s.pendingReservations.length === 0 ? s : undefined;
    });
    assert.equal(await balanceOf(userId), before, "nothing charged");
    const history = await examples.lib.tally().credits.transactions({ userId, limit: 5 });
    assert.ok(history.items.some((t) => t.type === "reservation_release"));
  });

  it("answers 402 before streaming when the estimate is not covered", async () => {
    const response = await examples.chat.chat(appUser("gus"), "chat-3", "Hi", mockModel({ input: 1, output: 1 }), "gpt-4o");
    assert.equal(response.status, 402);
  });
});

describe("refunds", () => {
  it("refunds part of an order from the operator's side and takes back its share", async () => {
    const orderId = await buyCredits("hal");
    const answer = JSON.parse(await operator(server, "refund.sh", { ORDER_ID: orderId })) as { state: string };
    assert.ok(["pending", "succeeded"].includes(answer.state), answer.state);
    const client: TallyClient = examples.lib.tallyAs(appUser("hal"));
    const order = await eventually("the refund", async () => {
      const o = await client.payments.status(orderId);
      return o.status === "partially_refunded" ? o : undefined;
    });
    assert.equal(order.orderId, orderId);
    const userId = await examples.lib.tallyUserId(appUser("hal"));
    assert.ok((await balanceOf(userId)) < 50_000, "the refunded share was taken back");
  });
});

describe("entitlements and events", () => {
  it("reads a subscriber's entitlements", async () => {
    const before = await examples.account.accountSummary(appUser("jay"));
    assert.deepEqual([before.canExportPdf, before.projectLimit, before.hasAccess], [false, 0, false]);
    await buy("jay", "pro_monthly");
    const summary = await examples.account.accountSummary(appUser("jay"));
    assert.equal(summary.subscription, "pro_monthly");
    assert.equal(summary.hasAccess, true);
    assert.equal(summary.canExportPdf, true);
    assert.equal(summary.projectLimit, 10);
    const userId = await examples.lib.tallyUserId(appUser("jay"));
    const view = await examples.lib.tally().entitlements.get({ userId });
    assert.deepEqual(view.entitlements, { export_pdf: true, projects: 10 });
    assert.ok(view.grants.every((g) => g.planId === "pro_monthly" && g.subscriptionId !== undefined));
  });

  it("delivers signed events that the guide's route verifies and applies once", async () => {
    await buyCredits("ivy");
    const { db } = examples.db;
    await eventually("order.paid and credits.granted delivered", async () =>
      db.plans.get("app-user-ivy")?.has("credits_card_500") && db.notices.includes("app-user-ivy: +500.00 credits")
        ? true
        : undefined,
    );
    await eventually("subscription.activated delivered", async () =>
      db.plans.get("app-user-jay")?.has("pro_monthly") ? true : undefined,
    );
  });

  it("tells a balance running low, then running out, once each", async () => {
    await buyCredits("ned");
    const { db } = examples.db;
    // 982 000 tokens of a model priced at the default multiplier: 491.00 credits, 9.00 left.
    await examples.spend.chargeTokens(appUser("ned"), "big-1", "llama-3-70b", 982_000);
    await examples.spend.chargeTokens(appUser("ned"), "big-2", "llama-3-70b", 2_000);
    await eventually("credits.low_balance delivered", async () =>
      db.notices.includes("app-user-ned: 9.00 credits left, time to top up") ? true : undefined,
    );
    await examples.spend.chargeTokens(appUser("ned"), "big-3", "llama-3-70b", 16_000);
    await eventually("credits.depleted delivered", async () =>
      db.notices.includes("app-user-ned: out of credits") ? true : undefined,
    );
    const userId = await examples.lib.tallyUserId(appUser("ned"));
    const lows: string[] = [];
    for await (const page of examples.lib.tally().listEvents({ type: ["credits.low_balance", "credits.depleted"] })) {
      lows.push(...page.events.filter((e) => e.data.userId === userId).map((e) => e.type));
    }
    assert.deepEqual(lows, ["credits.low_balance", "credits.depleted"], "once per crossing");
  });

  it("keeps deliveries verifiable with the old and the new secret while the secret rotates", async () => {
    const { db } = examples.db;
    const admin = await administrator();
    const { data: rotated } = await admin.raw.POST("/api/admin/webhook-endpoints/{id}/rotate-secret", {
      params: { path: { id: endpointId } },
    });
    assert.ok(rotated && rotated.secret !== process.env.TALLY_WEBHOOK_SECRET, "a new secret");
    // The route still holds the old secret: both signatures are sent for a day.
    await buyCredits("kim");
    await eventually("kim's order.paid, verified with the old secret", async () =>
      db.plans.get("app-user-kim")?.has("credits_card_500") ? true : undefined,
    );
    process.env.TALLY_WEBHOOK_SECRET = rotated.secret;
    await buyCredits("lea");
    await eventually("lea's order.paid, verified with the new secret", async () =>
      db.plans.get("app-user-lea")?.has("credits_card_500") ? true : undefined,
    );
  });

  it("replays what the app missed from the feed, and nothing twice", async () => {
    const { db } = examples.db;
    // The app lost its state (it was down, say): it starts again from the oldest kept event.
    db.handledEvents.clear();
    db.plans.clear();
    db.notices.length = 0;
    db.eventCursor = undefined;
    const applied = await examples.replay.catchUp();
    assert.ok(applied >= 5, `replayed ${applied} events`);
    assert.ok(db.plans.get("app-user-ivy")?.has("credits_card_500"));
    assert.ok(db.plans.get("app-user-jay")?.has("pro_monthly"));
    assert.ok(db.notices.includes("app-user-ivy: +500.00 credits"));
    assert.ok(db.eventCursor, "the cursor moved");
    assert.equal(await examples.replay.catchUp(), 0, "a second pass finds nothing new");

    const types: string[] = [];
    for await (const page of examples.lib.tally().listEvents({ type: ["order.paid", "credits.granted"], limit: 2 })) {
      types.push(...page.events.map((e) => e.type));
    }
    assert.ok(types.length >= 4 && types.every((t) => t === "order.paid" || t === "credits.granted"), types.join());
  });
});
