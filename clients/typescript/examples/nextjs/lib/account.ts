// lib/account.ts (server only): what the signed-in user holds, for your UI and your feature gates.
import { type AppUser, tally, tallyUserId } from "@/lib/tally";

export async function accountSummary(user: AppUser) {
  const userId = await tallyUserId(user);
  const [status, { entitlements }] = await Promise.all([
    tally().credits.status({ userId }),
    tally().entitlements.get({ userId }), // the plans' `entitlements`, over everything the user holds
  ]);
  return {
    credits: status.balance, // "499.50"
    creditsHundredths: status.balanceHundredths, // 49950: compare integers, not strings
    hasAccess: status.hasAccess, // a live subscription or a one-time purchase
    subscription: status.subscription?.planId,
    renewsAt: status.subscription?.cancelAtPeriodEnd ? undefined : status.subscription?.currentPeriodEnd,
    canExportPdf: entitlements.export_pdf === true,
    projectLimit: typeof entitlements.projects === "number" ? entitlements.projects : 0,
  };
}
