// server.ts (Express): the same event route; express.raw keeps the body the signature covers.
import { type AnyTallyEvent, EventVerificationError, verifyEvent } from "@tally/client";
import express from "express";
import { applyEvent } from "@/lib/apply-event";
import { db } from "@/lib/db";

export const app = express();

app.post("/api/tally/events", express.raw({ type: "application/json" }), async (req, res) => {
  let event: AnyTallyEvent;
  try {
    event = verifyEvent(process.env.TALLY_WEBHOOK_SECRET ?? "", req.headers, req.body as Buffer);
  } catch (error) {
    if (error instanceof EventVerificationError) {
      res.status(400).send("invalid signature");
      return;
    }
    throw error;
  }
  await db.once(event.id, () => applyEvent(event));
  res.status(204).end();
});
