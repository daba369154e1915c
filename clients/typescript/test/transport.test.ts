/**
 * The client's transport without a server: which answers are retried (with the same
 * idempotency key), which are thrown at once, timeouts, and how credentials are sent.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createTallyClient, isTallyError, TallyError } from "@tally/client";

const consumption = {
  transactionId: 1,
  userId: "usr_1",
  cost: "1.00",
  costHundredths: 100,
  balanceAfter: "9.00",
  balanceAfterHundredths: 900,
  createdAt: "2026-11-25T00:00:00.000Z",
};

function problem(status: number, code: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ type: `urn:tally:problem:${code}`, title: code, status, detail: `a ${code}`, code }), {
    status,
    headers: { "content-type": "application/problem+json", "x-request-id": "req_1", ...headers },
  });
}

/** A fetch answering `answers` in turn and recording each request. */
function scripted(answers: (() => Response | Promise<Response>)[]) {
  const seen: Request[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    seen.push(request);
    const next = answers[seen.length - 1];
    assert.ok(next, `an unexpected request #${seen.length}`);
    return next();
  };
  return { seen, fetch };
}

const fast = { backoffMs: 1, maxDelayMs: 20, timeoutMs: 200 };

describe("retries", () => {
  it("retries 503 and 429 with the same idempotency key, then answers", async () => {
    const { seen, fetch } = scripted([
      () => problem(503, "unavailable"),
      () => problem(429, "rate_limited", { "retry-after": "1" }),
      () => Response.json(consumption, { status: 201, headers: { "idempotency-replayed": "true" } }),
    ]);
    const tally = createTallyClient({ baseUrl: "http://tally.test/", apiKey: "tly_x", fetch, retry: fast });
    const spent = await tally.credits.consume({ userId: "usr_1", feature: "chat" });
    assert.equal(seen.length, 3);
    const keys = new Set(seen.map((r) => r.headers.get("idempotency-key")));
    assert.deepEqual([...keys], [spent.idempotencyKey]);
    assert.equal(spent.replayed, true);
    assert.equal(spent.costHundredths, 100);
    assert.equal(seen[0]?.url, "http://tally.test/api/credits/consume");
    assert.equal(seen[0]?.headers.get("authorization"), "Bearer tly_x");
  });

  it("throws a 4xx problem at once, typed", async () => {
    const { seen, fetch } = scripted([() => problem(402, "insufficient_credits")]);
    const tally = createTallyClient({ baseUrl: "http://tally.test", apiKey: "tly_x", fetch, retry: fast });
    const error = await tally.credits.consume({ userId: "usr_1", feature: "image" }, { idempotencyKey: "k1" }).catch((e: unknown) => e);
    assert.equal(seen.length, 1);
    assert.ok(isTallyError(error, "insufficient_credits"));
    assert.deepEqual([error.status, error.title, error.detail, error.requestId], [402, "insufficient_credits", "a insufficient_credits", "req_1"]);
    assert.equal(seen[0]?.headers.get("idempotency-key"), "k1");
  });

  it("gives up after the retries, and names an answer that is not problem JSON", async () => {
    const html = () => new Response("<html>bad gateway</html>", { status: 502, headers: { "content-type": "text/html" } });
    const { seen, fetch } = scripted([html, html, html]);
    const tally = createTallyClient({ baseUrl: "http://tally.test", fetch, retry: fast });
    const error = await tally.plans.list().catch((e: unknown) => e);
    assert.equal(seen.length, 3, "the first attempt and two retries");
    assert.ok(error instanceof TallyError);
    assert.deepEqual([error.status, error.code], [502, "http_error"]);
    assert.match(error.detail, /bad gateway/);
  });

  it("times an attempt out and retries it", async () => {
    const hang = () => new Promise<Response>(() => undefined);
    let calls = 0;
    const fetch = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      calls += 1;
      const request = new Request(input, init);
      if (calls === 1) {
        return new Promise((_, reject) => request.signal.addEventListener("abort", () => reject(request.signal.reason)));
      }
      return calls === 2 ? Promise.resolve(Response.json({ plans: [] })) : hang();
    };
    const tally = createTallyClient({ baseUrl: "http://tally.test", fetch, retry: { ...fast, timeoutMs: 50 } });
    // AbortSignal.timeout's timer does not keep Node alive (a real fetch's socket would).
    const alive = setInterval(() => undefined, 1_000);
    try {
      assert.deepEqual(await tally.plans.list(), []);
    } finally {
      clearInterval(alive);
    }
    assert.equal(calls, 2);
  });

  it("does not retry what would repeat an effect without a key", async () => {
    const { seen, fetch } = scripted([() => problem(503, "unavailable")]);
    const tally = createTallyClient({ baseUrl: "http://tally.test", sessionToken: "s", fetch, retry: fast });
    await assert.rejects(tally.admin.createApiKey({ name: "k", scopes: [] }), (e: unknown) => isTallyError(e, "unavailable"));
    assert.equal(seen.length, 1);
  });
});

describe("credentials", () => {
  it("mints a host token per request", async () => {
    const me = { id: "hst_1", email: "hst_1@host.invalid", role: "user", createdAt: "2026-11-25T00:00:00.000Z" };
    const { seen, fetch } = scripted([() => Response.json(me), () => Response.json(me)]);
    let minted = 0;
    const tally = createTallyClient({ baseUrl: "http://tally.test", hostToken: async () => `jwt-${++minted}`, fetch });
    await tally.me();
    await tally.me();
    assert.deepEqual(
      seen.map((r) => r.headers.get("authorization")),
      ["Bearer jwt-1", "Bearer jwt-2"],
    );
  });

  it("refuses two credentials at once", () => {
    const both = { baseUrl: "http://tally.test", apiKey: "tly_x", sessionToken: "s" } as unknown as Parameters<typeof createTallyClient>[0];
    assert.throws(() => createTallyClient(both), /one of apiKey, hostToken or sessionToken/);
  });
});

describe("the events feed", () => {
  const event = { id: "evt_019b76daa80000000000000000000001", type: "order.paid", timestamp: "2026-01-01T00:00:00.000Z", data: { userId: "usr_1" } };

  it("follows short and empty pages while more is readable, and stops when the cursor stays", async () => {
    const { seen, fetch } = scripted([
      // A read filtered by type that found nothing among the events it looked at.
      () => Response.json({ data: [], nextCursor: "5000", hasMore: true }),
      () => Response.json({ data: [event], nextCursor: "5007", hasMore: true }),
      () => Response.json({ data: [], hasMore: false }),
    ]);
    const tally = createTallyClient({ baseUrl: "http://tally.test", apiKey: "tly_x", fetch });
    const pages = [];
    for await (const page of tally.listEvents({ type: "order.paid", limit: 10 })) {
      pages.push({ ids: page.events.map((e) => e.id), cursor: page.cursor, hasMore: page.hasMore });
    }
    assert.deepEqual(pages, [
      { ids: [], cursor: "5000", hasMore: true },
      { ids: [event.id], cursor: "5007", hasMore: true },
      { ids: [], cursor: "5007", hasMore: false },
    ]);
    assert.deepEqual(
      seen.map((r) => new URL(r.url).searchParams.get("after")),
      [null, "5000", "5007"],
    );
  });

  it("stops rather than asking for the same page again", async () => {
    const { seen, fetch } = scripted([() => Response.json({ data: [], hasMore: true })]);
    const tally = createTallyClient({ baseUrl: "http://tally.test", apiKey: "tly_x", fetch });
    for await (const page of tally.listEvents({ after: "42" })) {
      assert.equal(page.cursor, "42");
    }
    assert.equal(seen.length, 1);
  });
});
