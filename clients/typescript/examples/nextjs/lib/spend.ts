// lib/spend.ts (server only): spend credits per request, or per token.
import { isTallyError } from "@tally/client";
import { type AppUser, tally, tallyUserId } from "@/lib/tally";

/** A fixed-cost feature (`[fixedCosts]` in credits.toml). `jobId` makes a retry spend once. */
export async function chargeImage(user: AppUser, jobId: string): Promise<Response> {
  const userId = await tallyUserId(user);
  try {
    const spent = await tally().credits.consume({ userId, feature: "image" }, { idempotencyKey: `image:${jobId}` });
    return Response.json({ balance: spent.balanceAfter, replayed: spent.replayed });
  } catch (error) {
    if (isTallyError(error, "insufficient_credits")) {
      // Nothing was spent; `available` and `requested` say by how much it fell short.
      return Response.json({ needed: error.problem.requested, available: error.problem.available }, { status: 402 });
    }
    throw error;
  }
}

/** Per token, when the count is known up front (a completed, non-streamed call). */
export async function chargeTokens(user: AppUser, requestId: string, model: string, tokens: number) {
  const userId = await tallyUserId(user);
  return tally().credits.consume({ userId, model, tokens }, { idempotencyKey: `tokens:${requestId}` });
}
