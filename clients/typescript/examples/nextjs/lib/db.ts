// lib/db.ts: stands in for your app's database in these examples.
export const db = {
  handledEvents: new Set<string>(),
  plans: new Map<string, Set<string>>(), // your user id → plans they hold
  entitlements: new Map<string, Readonly<Record<string, true | number>>>(), // your user id → what they may use
  notices: [] as string[],
  eventCursor: undefined as string | undefined, // where the feed resumes

  /** Apply an event once: in your database, record its id in the same transaction. */
  async once(eventId: string, apply: () => Promise<void>): Promise<boolean> {
    if (this.handledEvents.has(eventId)) return false;
    await apply();
    this.handledEvents.add(eventId);
    return true;
  },
};
