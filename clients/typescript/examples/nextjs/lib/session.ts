// lib/session.ts (server only): a demo sign-in. Use your own (Auth.js, Clerk, …): all Tally needs
// is your user, read on the server from the session, never from the browser.
import { jwtVerify, SignJWT } from "jose";
import { cookies } from "next/headers";
import { redirect } from "next/navigation";
import type { AppUser } from "@/lib/tally";

const COOKIE = "demo_session";

function secret(): Uint8Array {
  const value = process.env.APP_SESSION_SECRET;
  if (!value) throw new Error("APP_SESSION_SECRET is not set");
  return new TextEncoder().encode(value);
}

/** Sign the user in: an HttpOnly cookie holding a signed token. */
export async function signIn(user: AppUser): Promise<void> {
  const token = await new SignJWT({ email: user.email })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(user.id)
    .setExpirationTime("8h")
    .sign(secret());
  (await cookies()).set(COOKIE, token, { httpOnly: true, sameSite: "lax", path: "/" });
}

export async function signOut(): Promise<void> {
  (await cookies()).delete(COOKIE);
}

/** The signed-in user, or undefined. */
export async function currentUser(): Promise<AppUser | undefined> {
  const token = (await cookies()).get(COOKIE)?.value;
  if (token === undefined) return undefined;
  try {
    const { payload } = await jwtVerify(token, secret(), { algorithms: ["HS256"] });
    return payload.sub && typeof payload.email === "string" ? { id: payload.sub, email: payload.email } : undefined;
  } catch {
    return undefined;
  }
}

/** The signed-in user; anyone else goes to the sign-in page. */
export async function requireUser(): Promise<AppUser> {
  const user = await currentUser();
  if (user === undefined) redirect("/sign-in");
  return user;
}
