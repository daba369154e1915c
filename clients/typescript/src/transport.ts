/**
 * One request to Tally: a timeout per attempt, bounded retries of what is safe to retry, and
 * error answers thrown as {@link TallyError}.
 *
 * A retry sends the same request again, `Idempotency-Key` included, so a spend that reached
 * Tally before the connection dropped is answered from its first outcome instead of spending
 * twice.
 */
import { TallyError } from "./errors.js";

/** How a request is retried. */
export interface RetryPolicy {
  /** Attempts after the first (default 2; 0 turns retries off). */
  readonly retries: number;
  /** Time allowed for one attempt, in milliseconds (default 30 000). */
  readonly timeoutMs: number;
  /** The first pause between attempts, doubled each time, in milliseconds (default 200). */
  readonly backoffMs: number;
  /** The longest pause, `Retry-After` included, in milliseconds (default 10 000). */
  readonly maxDelayMs: number;
}

/** The defaults of {@link RetryPolicy}. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  retries: 2,
  timeoutMs: 30_000,
  backoffMs: 200,
  maxDelayMs: 10_000,
};

/** What an openapi-fetch call resolves to. */
export interface FetchOutcome<T> {
  readonly data?: T;
  readonly error?: unknown;
  readonly response: Response;
}

/** Statuses worth another attempt: rate limited, or the service briefly unavailable. */
const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);

/**
 * Run `send` (one attempt, given its abort signal) until it answers, retrying timeouts,
 * network failures and the statuses above; returns the data and the answer.
 *
 * @throws {TallyError} for an error answer (after the retries, for a retryable one).
 * @throws the fetch error itself when the network fails on the last attempt.
 */
export async function request<T>(
  send: (signal: AbortSignal) => Promise<FetchOutcome<T>>,
  policy: RetryPolicy,
): Promise<{ data: T; response: Response }> {
  for (let attempt = 0; ; attempt += 1) {
    const last = attempt >= policy.retries;
    let outcome: FetchOutcome<T>;
    try {
      outcome = await send(AbortSignal.timeout(policy.timeoutMs));
    } catch (error) {
      if (last || !isTransient(error)) {
        throw error;
      }
      await sleep(backoff(policy, attempt));
      continue;
    }
    const { response } = outcome;
    if (response.ok) {
      return { data: outcome.data as T, response };
    }
    if (last || !RETRYABLE_STATUSES.has(response.status)) {
      throw TallyError.fromResponse(response, outcome.error);
    }
    await sleep(retryAfter(response, policy) ?? backoff(policy, attempt));
  }
}

/** A network failure or a timed-out attempt (not a bug in the caller's code). */
function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) {
    return false;
  }
  return error.name === "TimeoutError" || error.name === "AbortError" || error instanceof TypeError;
}

function backoff(policy: RetryPolicy, attempt: number): number {
  const full = Math.min(policy.maxDelayMs, policy.backoffMs * 2 ** attempt);
  return full / 2 + Math.random() * (full / 2);
}

/** `Retry-After` in milliseconds (seconds form), capped; undefined when absent or a date. */
function retryAfter(response: Response, policy: RetryPolicy): number | undefined {
  const seconds = Number(response.headers.get("retry-after"));
  if (!Number.isFinite(seconds) || seconds <= 0) {
    return undefined;
  }
  return Math.min(policy.maxDelayMs, seconds * 1000);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
