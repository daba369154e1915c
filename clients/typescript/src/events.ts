/**
 * Events Tally sends to the host app: their types, and `verifyEvent` for a signed delivery.
 *
 * Deliveries are signed per the Standard Webhooks specification (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`, `whsec_` secrets); the
 * check is the `standardwebhooks` package's, which also refuses a timestamp more than five
 * minutes away from now (a replayed delivery).
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";

import type { components } from "./openapi.js";

/** Every event type Tally sends (`docs/events.md`), as the envelope's `type` and the feed's `type` filter spell it. */
export const EVENT_TYPES = [
  "order.paid",
  "order.failed",
  "order.refunded",
  "order.cancelled",
  "order.expired",
  "subscription.activated",
  "subscription.renewed",
  "subscription.past_due",
  "subscription.cancel_scheduled",
  "subscription.resumed",
  "subscription.plan_changed",
  "subscription.ended",
  "credits.granted",
  "credits.clawed_back",
  "credits.expired",
  "credits.low_balance",
  "credits.depleted",
  "credits.threshold_crossed",
  "credits.recovered",
  "limit.reached",
  "limit.reset",
  "credits.consumed",
  "credits.reserved",
  "credits.settled",
  "credits.released",
  "payment.mismatch",
  "entitlements.changed",
  "account.member_added",
  "account.member_removed",
  "account.member_role_changed",
  "account.seats_exceeded",
  "promo_code.redeemed",
  "auto_top_up.requested",
  "auto_top_up.succeeded",
  "auto_top_up.failed",
  "auto_top_up.disabled",
  "auto_top_up.authentication_required",
] as const;

/**
 * The high-volume consumption types: sent (and written) only to an endpoint whose `eventTypes`
 * names them; an endpoint with no `eventTypes` receives every other type.
 */
export const OPT_IN_EVENT_TYPES = ["credits.consumed", "credits.reserved", "credits.settled", "credits.released"] as const;

/** An event type. */
export type EventType = (typeof EVENT_TYPES)[number];

type Schemas = components["schemas"];

/** Whose event it is: the Tally user, your app's own subject for a host-token user, and the account. */
export interface EventUser {
  /** The Tally user id (`hst_…` for a host-token user): the member who acted on a team's account. */
  readonly userId?: string | null;
  /** The `sub` of the user's host tokens, when they sign in through your app. */
  readonly hostSubject?: string;
  /** The account the event is about: the user's own id for their personal account, `team_…` for a team's. */
  readonly accountId?: string | null;
  /** The member of a team's account who acted (spends, holds and member changes on a team). */
  readonly memberId?: string;
}

/** A change of a team's members (`account.member_added`, `…_removed`, `…_role_changed`). */
export interface MemberFacts {
  /** The member's role after the change (before it, for a removal). */
  readonly role: "owner" | "admin" | "member";
  /** Their role before the change (absent for an addition). */
  readonly previousRole?: "owner" | "admin" | "member";
  /** Who made the change (the member themself when they left). */
  readonly by: string;
}

/** How much of an order a refund gave back. */
export interface RefundFacts {
  /** This refund, in major units (decimal string). */
  readonly amount: string;
  /** This refund, in minor units. */
  readonly amountMinor: number;
  /** Everything refunded of the order so far, in major units. */
  readonly refundedTotal: string;
  /** Everything refunded so far, in minor units. */
  readonly refundedTotalMinor: number;
  /** ISO 4217 code. */
  readonly currency: string;
  /** Whether the order is now refunded in full. */
  readonly full: boolean;
}

/** A balance threshold crossed, the balance after the posting, and the posting (`credits.threshold_crossed`, `credits.recovered`). */
export interface ThresholdFacts {
  /** The threshold, and the level it sat at when crossed. */
  readonly threshold: {
    readonly id: string;
    readonly accountId: string;
    /** The balance it sat at (decimal string). */
    readonly level: string;
    readonly levelHundredths: number;
    /** Set in credits. */
    readonly credits?: string;
    readonly creditsHundredths?: number;
    /** Set as a percentage of the account's last grant. */
    readonly percentOfGrant?: number;
    /** Set as a percentage of the credits of the limit `limitId`. */
    readonly percentOfLimit?: number;
    readonly limitId?: string;
  };
  /** The balance after the posting (decimal string). */
  readonly balance: string;
  /** The same, in hundredths of a credit. */
  readonly balanceHundredths: number;
  /** The posting that crossed: a spend, a hold, a settle, a release, a grant, a clawback or an expiry. */
  readonly transaction: Schemas["TransactionView"];
}

/** The balance after a spend, and the spend (`credits.low_balance`, `credits.depleted`). */
export interface BalanceFacts {
  /** The balance after the spend (decimal string). */
  readonly balance: string;
  /** The balance after the spend, in hundredths of a credit. */
  readonly balanceHundredths: number;
  /** The spend: a consumption, or a reservation's hold. */
  readonly transaction: Schemas["TransactionView"];
}

/** A user's entitlements: feature keys mapped to `true` (on) or a limit. */
export type EntitlementMap = Readonly<Record<string, true | number>>;

/** A reservation's step (`credits.reserved`, `credits.settled`, `credits.released`). */
export interface ReservationFacts {
  /** The reservation as it is after the step. */
  readonly reservation: Schemas["ReservationView"];
  /** The ledger transaction the step wrote (a settle of exactly the held amount writes none). */
  readonly transaction?: Schemas["TransactionView"];
}

/** What each event type carries in `data`, besides {@link EventUser}. */
export interface EventData {
  "order.paid": { readonly order: Schemas["OrderView"] };
  "order.failed": { readonly order: Schemas["OrderView"]; readonly reason?: string };
  "order.refunded": { readonly order: Schemas["OrderView"]; readonly refund: RefundFacts };
  "order.cancelled": { readonly order: Schemas["OrderView"] };
  "order.expired": { readonly order: Schemas["OrderView"] };
  "subscription.activated": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.renewed": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.past_due": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.cancel_scheduled": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.resumed": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.plan_changed": { readonly subscription: Schemas["SubscriptionView"] };
  "subscription.ended": { readonly subscription: Schemas["SubscriptionView"] };
  "credits.granted": { readonly transaction: Schemas["TransactionView"] };
  "credits.clawed_back": { readonly transaction: Schemas["TransactionView"] };
  "credits.expired": { readonly transaction: Schemas["TransactionView"] };
  "credits.low_balance": BalanceFacts & {
    /** `[events] lowBalanceThreshold`, in credits (decimal string). */
    readonly threshold: string;
    /** The threshold in hundredths of a credit. */
    readonly thresholdHundredths: number;
  };
  "credits.depleted": BalanceFacts;
  "credits.threshold_crossed": ThresholdFacts;
  "credits.recovered": ThresholdFacts;
  "limit.reached": {
    /** The spend limit, as `GET /api/limits` shows it, after the spend that reached it. */
    readonly limit: Schemas["SpendLimitView"];
    /** The spend: a consumption, a reservation's hold, or a settle's overrun. */
    readonly transaction: Schemas["TransactionView"];
  };
  "limit.reset": {
    /** The spend limit, as `GET /api/limits` shows it, once its window reset with room again. */
    readonly limit: Schemas["SpendLimitView"];
  };
  "credits.consumed": { readonly transaction: Schemas["TransactionView"] };
  "credits.reserved": ReservationFacts;
  "credits.settled": ReservationFacts;
  "credits.released": ReservationFacts;
  "payment.mismatch": {
    readonly provider: string;
    readonly providerEventId: string;
    readonly providerEventType: string;
    readonly detail: string | null;
    readonly order?: Schemas["OrderView"];
  };
  "entitlements.changed": {
    /** The user's effective entitlements now. */
    readonly entitlements: EntitlementMap;
    /** Those told before; for a user told nothing yet, those held just before the change. */
    readonly previous: EntitlementMap;
  };
  "account.member_added": MemberFacts;
  "account.member_removed": MemberFacts;
  "account.member_role_changed": MemberFacts;
  "account.seats_exceeded": {
    /** The seats the team holds. */
    readonly seats: number;
    /** Its present members when the addition was refused, or when its seats went down. */
    readonly members: number;
    /** Who asked for the addition (the refused user themself when their host token named the team's organisation); `null` when the team's seats went down below its members. */
    readonly by: string | null;
    /** `addition_refused`: a user was not added; `seats_reduced`: a downgrade, a refund or a plan ending left the team fewer seats than members (nobody was removed). */
    readonly cause: "addition_refused" | "seats_reduced";
  };
  "promo_code.redeemed": {
    /** The code redeemed (upper-case). */
    readonly code: string;
    /** The redemption's id. */
    readonly redemptionId: string;
    /** Credits granted (decimal string); `credits.granted` tells the ledger entry. */
    readonly credits: string;
    /** What they are: `promotional`, `bonus`, `compensation` or `paid`. */
    readonly category: string;
    /** When they expire (RFC 3339), or `null`. */
    readonly expiresAt: string | null;
  };
  "auto_top_up.requested": TopUpFacts;
  "auto_top_up.succeeded": TopUpFacts;
  "auto_top_up.failed": TopUpFacts;
  "auto_top_up.authentication_required": TopUpFacts;
  "auto_top_up.disabled": {
    /** The account whose automatic top-up Tally turned off. */
    readonly accountId: string;
    /** Why: `declines` (too many in a row), `refunded` (a top-up refunded or disputed), `method_removed`. */
    readonly reason: string;
  };
}

/** What an `auto_top_up.*` event tells of one top-up (`GET /api/auto-top-up`'s history items). */
export interface TopUpFacts {
  /** The account topped up. */
  readonly accountId: string;
  /** The top-up as it stands after the change. */
  readonly topUp: {
    readonly id: string;
    readonly accountId: string;
    readonly planId: string;
    /** `requested`, `succeeded`, `failed` or `authentication_required`. */
    readonly status: string;
    /** The balance the spend that asked for it left (decimal string). */
    readonly balance: string;
    readonly orderId?: string;
    readonly amountMinor?: number;
    readonly currency?: string;
    readonly credits?: string;
    /** Why it failed, or `authentication_required`. */
    readonly reason?: string;
    /** Where the buyer finishes a charge that needs them. */
    readonly actionUrl?: string;
    readonly createdAt: string;
    readonly updatedAt: string;
  };
}

/** One event (the Standard Webhooks payload shape): what happened, to whom, and when. */
export interface TallyEvent<T extends EventType = EventType> {
  /** The event id (`evt_…`): the same on every delivery of this event and in the feed. */
  readonly id: string;
  /** The event type. */
  readonly type: T;
  /** When it happened (RFC 3339). */
  readonly timestamp: string;
  /** The objects it is about, as the API shows them, and whose it is. */
  readonly data: EventUser & EventData[T];
}

/** Any event, narrowed by `type`. */
export type AnyTallyEvent = { [T in EventType]: TallyEvent<T> }[EventType];

/** The headers of a delivery: a Fetch `Headers`, or Node's / Express's header object. */
export type EventHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** A delivery that failed verification: a bad or missing signature, a stale timestamp, or a body that is not an event. */
export class EventVerificationError extends Error {
  /** An error saying `message`. */
  constructor(message: string) {
    super(message);
    this.name = "EventVerificationError";
  }
}

/**
 * Verify a delivery signed with the endpoint's `secret` (`whsec_…`) and return its event.
 *
 * `body` must be the request body exactly as received (`await request.text()`, or Express's
 * `express.raw()` buffer): a body parsed and serialized again no longer matches its signature.
 * An event of a type this client does not know yet (Tally added one) is returned as it came:
 * keep a `default` branch when switching on `type`.
 *
 * @throws {EventVerificationError} when the signature, the timestamp or the body is wrong.
 */
export function verifyEvent(secret: string, headers: EventHeaders, body: string | Uint8Array): AnyTallyEvent {
  const payload = typeof body === "string" ? body : new TextDecoder().decode(body);
  let parsed: unknown;
  try {
    parsed = new Webhook(secret).verify(payload, plainHeaders(headers));
  } catch (error) {
    if (error instanceof WebhookVerificationError || error instanceof SyntaxError) {
      throw new EventVerificationError(error.message);
    }
    throw error;
  }
  return asEvent(parsed);
}

/** Whether `event` is of type `type` (narrows its type). */
export function isEventType<T extends EventType>(event: AnyTallyEvent, type: T): event is Extract<AnyTallyEvent, { type: T }> {
  return event.type === type;
}

function plainHeaders(headers: EventHeaders): Record<string, string> {
  const plain: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      plain[name] = value;
    });
    return plain;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === "string") {
      plain[name.toLowerCase()] = value;
    } else if (Array.isArray(value)) {
      plain[name.toLowerCase()] = value.join(" ");
    }
  }
  return plain;
}

function asEvent(parsed: unknown): AnyTallyEvent {
  if (typeof parsed !== "object" || parsed === null) {
    throw new EventVerificationError("the body is not an event object");
  }
  const event = parsed as Record<string, unknown>;
  if (typeof event.id !== "string" || typeof event.type !== "string" || typeof event.timestamp !== "string") {
    throw new EventVerificationError("the event has no id, type or timestamp");
  }
  if (typeof event.data !== "object" || event.data === null) {
    throw new EventVerificationError("the event has no data");
  }
  return event as unknown as AnyTallyEvent;
}
