// lib/tally.ts (server only): Tally for your backend, and Tally acting as one of your users.
import { createTallyClient, type TallyClient } from "@tally/client";
import { SignJWT } from "jose";

/** Your signed-in user, as your own sign-in knows them (see lib/session.ts). */
export interface AppUser {
  readonly id: string;
  readonly email: string;
  readonly name?: string;
}

// Settings are read when a request needs them, never at build time: `next build` runs without them.
function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** Your backend: an API key, for the user each call names (`userId`). */
export function tally(): TallyClient {
  return createTallyClient({ baseUrl: setting("TALLY_URL"), apiKey: setting("TALLY_API_KEY") });
}

/**
 * A short-lived host token for your user: Tally maps (issuer, subject) to a user of its own and
 * hands `email` and `name` to the payment provider (receipts, invoices).
 */
export function hostToken(user: AppUser): Promise<string> {
  return new SignJWT({ email: user.email, name: user.name })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(user.id)
    .setIssuer("https://app.example.com")
    .setAudience("tally")
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(new TextEncoder().encode(setting("TALLY_HOST_JWT_SECRET")));
}

/** Tally as your user sees it: checkout, orders, subscriptions. A fresh token per request. */
export function tallyAs(user: AppUser): TallyClient {
  return createTallyClient({ baseUrl: setting("TALLY_URL"), hostToken: () => hostToken(user) });
}

const tallyIds = new Map<string, string>();

/** The Tally user id (`hst_…`) of your user: created by their first host token, then the same. */
export async function tallyUserId(user: AppUser): Promise<string> {
  let id = tallyIds.get(user.id);
  if (id === undefined) {
    id = (await tallyAs(user).me()).id;
    tallyIds.set(user.id, id);
  }
  return id;
}

/** An address in your app (`APP_URL`), for the pages Tally sends buyers back to. */
export function appUrl(path: string): string {
  return new URL(path, setting("APP_URL")).toString();
}
