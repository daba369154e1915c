// app/account/summary.ts: what the signed-in user holds, for your UI and your feature gates.
import { tally, tallyUserId } from "./lib/tally.js";

export async function accountSummary(appUserId: string) {
  const userId = await tallyUserId(appUserId);
  const [status, { entitlements }] = await Promise.all([
    tally.credits.status({ userId }),
    tally.entitlements.get({ userId }), // the plans' `entitlements`, over everything the user holds
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
