// lib/apply-event.ts: what your app does with each of Tally's events (from the route or the feed).
import type { AnyTallyEvent } from "@tally/client";
import { db } from "@/lib/db";

export async function applyEvent(event: AnyTallyEvent): Promise<void> {
  const appUserId = event.data.hostSubject; // your own user id, for host-token users
  if (appUserId === undefined) return;
  const plans = db.plans.get(appUserId) ?? new Set<string>();
  db.plans.set(appUserId, plans);
  switch (event.type) {
    case "order.paid":
      plans.add(event.data.order.planId);
      break;
    case "subscription.activated":
    case "subscription.renewed":
      plans.add(event.data.subscription.planId);
      break;
    case "subscription.ended":
      plans.delete(event.data.subscription.planId);
      break;
    case "entitlements.changed":
      // The whole map as it is now (also when one-time access ran out): replace, do not merge.
      db.entitlements.set(appUserId, event.data.entitlements);
      break;
    case "credits.granted":
      db.notices.push(`${appUserId}: +${event.data.transaction.amount} credits`);
      break;
    case "credits.low_balance":
      db.notices.push(`${appUserId}: ${event.data.balance} credits left, time to top up`);
      break;
    case "credits.depleted":
      db.notices.push(`${appUserId}: out of credits`);
      break;
    default:
      break; // other types: see docs/events.md
  }
}
