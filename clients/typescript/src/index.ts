/**
 * `@tally/client`: Tally's API for a host app's backend.
 *
 * - {@link createTallyClient}: plans, credits (consume, reserve → settle/release), payments,
 *   administrator helpers; idempotency keys on every spend; errors as {@link TallyError}.
 * - {@link verifyEvent}: a signed event delivery, checked and typed.
 *
 * @packageDocumentation
 */
export * from "./client.js";
export * from "./errors.js";
export * from "./events.js";
export * from "./usage.js";
export type { RetryPolicy } from "./transport.js";
export type { components, paths } from "./openapi.js";
