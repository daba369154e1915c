/**
 * The AI SDK's `usage` object, mapped to the tokens by kind that Tally prices.
 *
 * @packageDocumentation
 */
import type { components } from "./openapi.js";

/** A call's tokens by kind, as consume, reserve and settle take them (`usage`). */
export type TokenUsage = components["schemas"]["TokenUsageBody"];

/**
 * The AI SDK's `LanguageModelUsage` (the `usage` of `generateText`, `streamText`'s `onFinish`, …),
 * described structurally so that this package does not depend on `ai`. Both the current shape
 * (`inputTokenDetails`, `outputTokenDetails`) and the older flat one (`cachedInputTokens`,
 * `reasoningTokens`) are read.
 */
export interface AiSdkUsage {
  readonly inputTokens?: number | undefined;
  readonly inputTokenDetails?: {
    readonly noCacheTokens?: number | undefined;
    readonly cacheReadTokens?: number | undefined;
    readonly cacheWriteTokens?: number | undefined;
  };
  readonly outputTokens?: number | undefined;
  readonly outputTokenDetails?: {
    readonly textTokens?: number | undefined;
    readonly reasoningTokens?: number | undefined;
  };
  readonly reasoningTokens?: number | undefined;
  readonly cachedInputTokens?: number | undefined;
}

const count = (n: number | undefined): number =>
  typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;

/**
 * Tally's tokens by kind from the AI SDK's `usage`. The SDK's `inputTokens` includes the tokens
 * read from and written to the provider's cache, and its `outputTokens` includes reasoning
 * tokens; Tally prices each kind apart, so they are split: input without the cached parts,
 * output without reasoning.
 *
 * ```ts
 * const { text, usage } = await generateText({ model: openai("gpt-4o"), prompt });
 * await tally.consume({ userId, model: "gpt-4o", usage: tokenUsageFromAiSdk(usage) });
 * ```
 */
export function tokenUsageFromAiSdk(usage: AiSdkUsage): TokenUsage {
  const cacheRead = count(usage.inputTokenDetails?.cacheReadTokens ?? usage.cachedInputTokens);
  const cacheWrite = count(usage.inputTokenDetails?.cacheWriteTokens);
  const input =
    usage.inputTokenDetails?.noCacheTokens !== undefined
      ? count(usage.inputTokenDetails.noCacheTokens)
      : Math.max(0, count(usage.inputTokens) - cacheRead - cacheWrite);
  const reasoning = count(usage.outputTokenDetails?.reasoningTokens ?? usage.reasoningTokens);
  const output =
    usage.outputTokenDetails?.textTokens !== undefined
      ? count(usage.outputTokenDetails.textTokens)
      : Math.max(0, count(usage.outputTokens) - reasoning);
  return {
    inputTokens: input,
    outputTokens: output,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    reasoningTokens: reasoning,
  };
}
