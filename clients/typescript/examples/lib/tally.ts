// lib/tally.ts (server only): Tally for your backend, and Tally acting as one of your users.
import { createTallyClient, type TallyClient } from "@tally/client";
import { SignJWT } from "jose";

const baseUrl = setting("TALLY_URL"); // where Tally serves, e.g. https://pay.example.com

/** Your backend: reads and spends credits for any user it names (API key, see above). */
export const tally = createTallyClient({ baseUrl, apiKey: setting("TALLY_API_KEY") });

const hostSecret = new TextEncoder().encode(setting("TALLY_HOST_JWT_SECRET"));

/** A short-lived host token for your signed-in user: Tally maps (issuer, subject) to a user of its own. */
export function hostToken(appUserId: string): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(appUserId)
    .setIssuer("https://app.example.com")
    .setAudience("tally")
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(hostSecret);
}

/** Tally as your user `appUserId` sees it: checkout, their own status. A fresh token per request. */
export function tallyAs(appUserId: string): TallyClient {
  return createTallyClient({ baseUrl, hostToken: () => hostToken(appUserId) });
}

const tallyIds = new Map<string, string>();

/** The Tally user id (`hst_…`) of your user: created by their first host token, then the same. */
export async function tallyUserId(appUserId: string): Promise<string> {
  let id = tallyIds.get(appUserId);
  if (id === undefined) {
    id = (await tallyAs(appUserId).me()).id;
    tallyIds.set(appUserId, id);
  }
  return id;
}

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}
