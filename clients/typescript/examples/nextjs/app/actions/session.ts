// app/actions/session.ts: the demo sign-in and sign-out (server actions).
"use server";

import { redirect } from "next/navigation";
import { signIn, signOut } from "@/lib/session";

export async function signInWithEmail(formData: FormData): Promise<void> {
  const email = String(formData.get("email") ?? "").trim().toLowerCase();
  if (!/^[^@\s]+@[^@\s]+$/.test(email)) redirect("/sign-in");
  // Demo only: the e-mail alone signs in. Your sign-in checks a password, a magic link, …
  await signIn({ id: `user:${email}`, email });
  redirect("/pricing");
}

export async function signOutNow(): Promise<void> {
  await signOut();
  redirect("/");
}
