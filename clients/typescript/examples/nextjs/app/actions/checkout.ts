// app/actions/checkout.ts: start a checkout for the signed-in user, then send the browser to the provider.
"use server";

import { isTallyError } from "@tally/client";
import { redirect } from "next/navigation";
import { requireUser } from "@/lib/session";
import { appUrl, tallyAs } from "@/lib/tally";

export async function startCheckout(form: FormData): Promise<void> {
  // The buyer comes from your server-side session, never from the form: the form only says what to buy.
  const user = await requireUser();
  let url: string | undefined;
  try {
    const order = await tallyAs(user).initiatePayment(
      {
        planId: String(form.get("planId")),
        provider: String(form.get("provider")),
        // Tally sends the buyer back here with `orderId` and `outcome` appended.
        successUrl: appUrl("/checkout/success"),
        cancelUrl: appUrl("/checkout/cancelled"),
      },
      { idempotencyKey: `checkout:${user.id}:${String(form.get("checkoutKey"))}` },
    );
    url = order.paymentUrl ?? order.qrCodeUrl; // the provider's page (a QR code's link for wallet_qr)
  } catch (error) {
    // Already holds it (`already_subscribed` / `already_owned`): show what they have.
    if (isTallyError(error) && error.status === 409) redirect("/account");
    throw error;
  }
  if (url === undefined) throw new Error("the order has no checkout page");
  redirect(url);
}
