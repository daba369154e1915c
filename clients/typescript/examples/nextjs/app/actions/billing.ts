// app/actions/billing.ts: the billing portal and cancelling, for the signed-in user (server actions).
"use server";

import { revalidatePath } from "next/cache";
import { redirect } from "next/navigation";
import { requireUser } from "@/lib/session";
import { appUrl, tally, tallyAs, tallyUserId } from "@/lib/tally";

/** Tally's hosted billing pages for this user, for minutes, with a link back to your account page. */
export async function openBillingPortal(): Promise<void> {
  const user = await requireUser();
  const portal = await tally().createPortalSession({
    userId: await tallyUserId(user),
    returnUrl: appUrl("/account"),
    locale: "en",
  });
  redirect(portal.url);
}

/** Tally's hosted billing pages for a team (`teamId`): Tally lets only its owners and admins in. */
export async function openTeamBillingPortal(form: FormData): Promise<void> {
  const user = await requireUser();
  const portal = await tally().createPortalSession({
    userId: await tallyUserId(user),
    accountId: String(form.get("teamId")),
    returnUrl: appUrl("/account"),
    locale: "en",
  });
  redirect(portal.url);
}

/** Cancel at the end of the paid period. As the user: Tally refuses a subscription that is not theirs. */
export async function cancelSubscription(form: FormData): Promise<void> {
  const user = await requireUser();
  await tallyAs(user).cancelSubscription(String(form.get("subscriptionId")));
  revalidatePath("/account");
}
