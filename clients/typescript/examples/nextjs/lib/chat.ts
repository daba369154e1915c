// lib/chat.ts (server only): a streamed completion, paid per token with a reservation.
import { isTallyError } from "@tally/client";
import { type LanguageModel, streamText } from "ai";
import { type AppUser, tally, tallyUserId } from "@/lib/tally";

const ESTIMATE_TOKENS = 4_000; // hold enough for a long answer; what is not used returns

export async function chat(user: AppUser, requestId: string, prompt: string, model: LanguageModel, modelName: string) {
  const userId = await tallyUserId(user);
  const credits = tally().credits;
  const hold = await credits
    .reserve({ userId, model: modelName, tokens: ESTIMATE_TOKENS }, { idempotencyKey: `chat:${requestId}` })
    .catch((error: unknown) => {
      if (isTallyError(error, "insufficient_credits")) return undefined;
      throw error;
    });
  if (hold === undefined) return new Response("Not enough credits", { status: 402 });
  const release = () => credits.release(hold.id, { userId });
  const result = streamText({
    model,
    prompt,
    // Settle with what the model really used (the AI SDK's usage numbers).
    onFinish: async ({ totalUsage }) => {
      const tokens = totalUsage.totalTokens ?? ESTIMATE_TOKENS;
      await credits.settle(hold.id, { userId, model: modelName, tokens: Math.max(1, tokens) });
    },
    onError: async () => void (await release()),
    onAbort: async () => void (await release()),
  });
  return result.toTextStreamResponse();
}
