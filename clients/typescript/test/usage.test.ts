/**
 * `tokenUsageFromAiSdk` against the `usage` the AI SDK itself reports for a mock model's call:
 * the SDK's input and output totals include cached and reasoning tokens, which Tally prices
 * apart.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { tokenUsageFromAiSdk } from "@tally/client";
import { generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";

function model(usage: {
  input: { total: number; noCache?: number; cacheRead?: number; cacheWrite?: number };
  output: { total: number; text?: number; reasoning?: number };
}): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [{ type: "text", text: "Hello." }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: {
        inputTokens: {
          total: usage.input.total,
          noCache: usage.input.noCache,
          cacheRead: usage.input.cacheRead,
          cacheWrite: usage.input.cacheWrite,
        },
        outputTokens: { total: usage.output.total, text: usage.output.text, reasoning: usage.output.reasoning },
      },
      warnings: [],
    }),
  });
}

describe("tokenUsageFromAiSdk", () => {
  it("splits cached input and reasoning out of the SDK's totals", async () => {
    const { usage } = await generateText({
      model: model({
        input: { total: 1_500, noCache: 200, cacheRead: 1_000, cacheWrite: 300 },
        output: { total: 400, text: 350, reasoning: 50 },
      }),
      prompt: "Hi",
    });
    assert.deepEqual(tokenUsageFromAiSdk(usage), {
      inputTokens: 200,
      outputTokens: 350,
      cacheReadTokens: 1_000,
      cacheWriteTokens: 300,
      reasoningTokens: 50,
    });
  });

  it("derives the uncached and text parts when a provider reports only totals", async () => {
    const { usage } = await generateText({
      model: model({ input: { total: 900, cacheRead: 600 }, output: { total: 120, reasoning: 20 } }),
      prompt: "Hi",
    });
    assert.deepEqual(tokenUsageFromAiSdk(usage), {
      inputTokens: 300,
      outputTokens: 100,
      cacheReadTokens: 600,
      cacheWriteTokens: 0,
      reasoningTokens: 20,
    });
  });

  it("reads the older flat shape and never reports a negative or fractional count", () => {
    assert.deepEqual(
      tokenUsageFromAiSdk({ inputTokens: 50, outputTokens: 10, cachedInputTokens: 80, reasoningTokens: 4.7 }),
      { inputTokens: 0, outputTokens: 6, cacheReadTokens: 80, cacheWriteTokens: 0, reasoningTokens: 4 },
    );
    assert.deepEqual(tokenUsageFromAiSdk({}), {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
    });
  });
});
