/**
 * `verifyEvent` and the guide's event route against Standard Webhooks signatures made with the
 * `standardwebhooks` package (the same scheme Tally signs with): a genuine delivery is accepted
 * and typed, anything altered is refused.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";

import { EventVerificationError, isEventType, verifyEvent } from "@tally/client";
import { Webhook } from "standardwebhooks";

import { app as expressApp } from "../examples/express-events.js";
import { POST } from "../examples/nextjs/app/api/tally/events/route.ts";
import { db } from "../examples/nextjs/lib/db.ts";

const secret = `whsec_${randomBytes(24).toString("base64")}`;

const paid = {
  id: "evt_0123456789abcdef0123456789abcdef",
  type: "order.paid",
  timestamp: "2026-11-25T00:00:00.000Z",
  data: {
    userId: "hst_abc",
    hostSubject: "app-user-ada",
    order: {
      orderId: "ord_1",
      status: "paid",
      planId: "credits_card_500",
      planType: "credits",
      provider: "card_gateway",
      amount: "4.99",
      amountMinor: 499,
      currency: "USD",
      credits: "500.00",
      creditsHundredths: 50000,
      createdAt: "2026-11-25T00:00:00.000Z",
      expiresAt: "2026-11-25T01:00:00.000Z",
      paidAt: "2026-11-25T00:00:00.000Z",
    },
  },
};

/** The headers of a delivery of `body` signed with `key` (at `when`). */
function signed(body: string, key = secret, when = new Date(), id = "msg_1"): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(when.getTime() / 1000)),
    "webhook-signature": new Webhook(key).sign(id, when, body),
  };
}

function refused(run: () => unknown, why: RegExp): void {
  assert.throws(run, (e: unknown) => e instanceof EventVerificationError && why.test(e.message));
}

describe("verifyEvent", () => {
  it("accepts a genuine delivery and types it by its type", () => {
    const body = JSON.stringify(paid);
    const event = verifyEvent(secret, new Headers(signed(body)), body);
    assert.equal(event.id, paid.id);
    assert.ok(isEventType(event, "order.paid"));
    assert.equal(event.data.order.planId, "credits_card_500");
    assert.equal(event.data.hostSubject, "app-user-ada");
  });

  it("takes Node's and Express's header objects and a Buffer body", () => {
    const body = JSON.stringify(paid);
    const headers = Object.fromEntries(Object.entries(signed(body)).map(([k, v]) => [k.toUpperCase(), v]));
    assert.equal(verifyEvent(secret, headers, Buffer.from(body)).type, "order.paid");
  });

  it("accepts either signature while a secret is rotated", () => {
    const body = JSON.stringify(paid);
    const old = `whsec_${randomBytes(24).toString("base64")}`;
    const both = signed(body);
    both["webhook-signature"] = `${signed(body, old)["webhook-signature"]} ${both["webhook-signature"]}`;
    assert.equal(verifyEvent(secret, both, body).id, paid.id);
    assert.equal(verifyEvent(old, both, body).id, paid.id);
  });

  it("refuses a tampered body, another secret, a missing or stale signature", () => {
    const body = JSON.stringify(paid);
    const headers = signed(body);
    refused(() => verifyEvent(secret, headers, body.replace("4.99", "0.01")), /signature/);
    refused(() => verifyEvent(`whsec_${randomBytes(24).toString("base64")}`, headers, body), /signature/);
    refused(() => verifyEvent(secret, { ...headers, "webhook-signature": "" }, body), /headers/i);
    const stale = new Date(Date.now() - 10 * 60 * 1000);
    refused(() => verifyEvent(secret, signed(body, secret, stale), body), /too old/);
    const replayedId = { ...headers, "webhook-id": "msg_2" };
    refused(() => verifyEvent(secret, replayedId, body), /signature/);
  });

  it("refuses a signed body that is not an event", () => {
    const body = JSON.stringify({ hello: "world" });
    refused(() => verifyEvent(secret, signed(body), body), /no id, type or timestamp/);
  });
});

describe("the guide's event route", () => {
  it("applies a signed event once, and answers 400 to a forged one", async () => {
    process.env.TALLY_WEBHOOK_SECRET = secret;
    const body = JSON.stringify(paid);
    const deliver = (text: string, headers: Record<string, string>) =>
      POST(new Request("http://app.test/api/tally/events", { method: "POST", headers, body: text }));

    assert.equal((await deliver(body, signed(body))).status, 204);
    assert.deepEqual([...(db.plans.get("app-user-ada") ?? [])], ["credits_card_500"]);
    // Tally retries until it gets a 2xx: the second delivery changes nothing.
    db.plans.get("app-user-ada")?.clear();
    assert.equal((await deliver(body, signed(body, secret, new Date(), "msg_retry"))).status, 204);
    assert.equal(db.plans.get("app-user-ada")?.size, 0, "applied once");

    const forged = body.replace("app-user-ada", "app-user-eve");
    assert.equal((await deliver(forged, signed(body))).status, 400);
    assert.equal(db.plans.has("app-user-eve"), false);
  });
});

describe("the guide's Express route", () => {
  it("verifies the raw body Express kept, and answers 400 to a forged one", async () => {
    process.env.TALLY_WEBHOOK_SECRET = secret;
    const listening = expressApp.listen(0, "127.0.0.1");
    await new Promise((resolve) => listening.once("listening", resolve));
    try {
      const url = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/api/tally/events`;
      const event = { ...paid, id: "evt_express0000000000000000000000", data: { ...paid.data, hostSubject: "app-user-zed" } };
      const body = JSON.stringify(event);
      const post = (text: string, headers: Record<string, string>) =>
        fetch(url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: text });
      assert.equal((await post(body, signed(body, secret, new Date(), "msg_x"))).status, 204);
      assert.ok(db.plans.get("app-user-zed")?.has("credits_card_500"));
      const forged = body.replace("4.99", "0.01");
      assert.equal((await post(forged, signed(body, secret, new Date(), "msg_y"))).status, 400);
    } finally {
      await new Promise((resolve) => listening.close(resolve));
    }
  });
});
