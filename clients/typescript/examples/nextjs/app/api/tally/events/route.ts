// app/api/tally/events/route.ts: Tally's signed events (Standard Webhooks), verified and applied once.
import { type AnyTallyEvent, EventVerificationError, verifyEvent } from "@tally/client";
import { applyEvent } from "@/lib/apply-event";
import { db } from "@/lib/db";

export async function POST(request: Request): Promise<Response> {
  let event: AnyTallyEvent;
  try {
    // The raw body, exactly as sent: a body parsed and serialized again no longer matches.
    event = verifyEvent(process.env.TALLY_WEBHOOK_SECRET ?? "", request.headers, await request.text());
  } catch (error) {
    if (error instanceof EventVerificationError) return new Response("invalid signature", { status: 400 });
    throw error;
  }
  // Delivery is at least once, and retried until you answer 2xx: apply each event id once.
  await db.once(event.id, () => applyEvent(event));
  return new Response(null, { status: 204 });
}
