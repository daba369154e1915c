// lib/catch-up.ts (a job): replay from the feed what your app missed (it was down, its endpoint failing).
import { applyEvent } from "@/lib/apply-event";
import { db } from "@/lib/db";
import { tally } from "@/lib/tally";

export async function catchUp(): Promise<number> {
  let applied = 0;
  for await (const page of tally().listEvents({ after: db.eventCursor, limit: 100 })) {
    for (const event of page.events) {
      if (await db.once(event.id, () => applyEvent(event))) applied += 1;
    }
    db.eventCursor = page.cursor; // only once the page's events are applied
  }
  return applied;
}
