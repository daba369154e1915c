/**
 * Tally's errors as the client throws them.
 *
 * Every error answer of Tally is RFC 9457 problem JSON with a stable `code`; the client turns
 * it into a {@link TallyError} carrying that code, the HTTP status and the problem's extension
 * members (`available` and `requested` for `insufficient_credits`, `limit` for
 * `limit_reached`, `errors` for `validation_failed`, `retryAfterSeconds` for `rate_limited`).
 */
import type { components } from "./openapi.js";

/** The problem JSON body as Tally documents it. */
export type Problem = components["schemas"]["Problem"];

/** What `code` says when an answer was not problem JSON at all (a proxy's HTML page, say). */
export const NOT_PROBLEM_JSON = "http_error";

/** An error answer from Tally, thrown by every client method. */
export class TallyError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The stable problem code (`insufficient_credits`, `validation_failed`, …). */
  readonly code: string;
  /** A short summary of the problem type. */
  readonly title: string;
  /** What happened in this case. */
  readonly detail: string;
  /** The problem type URI (`urn:tally:problem:<code>`). */
  readonly type: string;
  /** The whole problem body, extension members included. */
  readonly problem: Readonly<Problem>;
  /** Tally's `X-Request-Id` for this request: its logs carry it. */
  readonly requestId: string | undefined;

  /** An error from a problem body; `requestId` is the answer's `X-Request-Id`. */
  constructor(problem: Problem, requestId?: string) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.name = "TallyError";
    this.status = problem.status;
    this.code = problem.code;
    this.title = problem.title;
    this.detail = problem.detail;
    this.type = problem.type;
    this.problem = problem;
    this.requestId = requestId;
  }

  /** The error for an answer `response` whose body parsed (or not) as `body`. */
  static fromResponse(response: Response, body: unknown): TallyError {
    const requestId = response.headers.get("x-request-id") ?? undefined;
    if (isProblem(body)) {
      return new TallyError(body, requestId);
    }
    const detail = typeof body === "string" && body.length > 0 ? body.slice(0, 200) : response.statusText;
    return new TallyError(
      {
        type: `urn:tally:problem:${NOT_PROBLEM_JSON}`,
        title: "Unexpected answer",
        status: response.status,
        detail: detail || `HTTP ${response.status}`,
        code: NOT_PROBLEM_JSON,
      },
      requestId,
    );
  }
}

/**
 * The limit a `limit_reached` error names (`scope` `member`: a limit on the team member who
 * spent, their seat's own without an `id` or a listed one with its `id` and `memberId`;
 * `account`: a limit on the account, with its `id` and any `feature` or `model`; `key`: a limit
 * on the API key that spent, with its `id` and `apiKeyId`): the cap, what is left in the window
 * and when it resets; `undefined` for any other error.
 */
export function limitReached(error: unknown): components["schemas"]["LimitReachedView"] | undefined {
  return isTallyError(error, "limit_reached") ? (error.problem.limit ?? undefined) : undefined;
}

/** Whether `error` is a {@link TallyError}, with `code` when one is given. */
export function isTallyError(error: unknown, code?: string): error is TallyError {
  return error instanceof TallyError && (code === undefined || error.code === code);
}

function isProblem(body: unknown): body is Problem {
  if (typeof body !== "object" || body === null) {
    return false;
  }
  const fields = body as Record<string, unknown>;
  return (
    typeof fields.code === "string" &&
    typeof fields.status === "number" &&
    typeof fields.title === "string" &&
    typeof fields.detail === "string" &&
    typeof fields.type === "string"
  );
}
