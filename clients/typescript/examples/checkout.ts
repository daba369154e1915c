// app/actions/checkout.ts ("use server"): start a checkout, then redirect the buyer to its URL.
import { tallyAs } from "./lib/tally.js";

export async function startCheckout(appUserId: string, planId: string, provider: string): Promise<string> {
  const order = await tallyAs(appUserId).payments.initiate({ planId, provider });
  // The provider's payment page (a QR code's link for wallet_qr). After paying, the buyer
  // lands on Tally's /payment-success; the credits arrive with the provider's signed webhook.
  const url = order.paymentUrl ?? order.qrCodeUrl;
  if (url === undefined) throw new Error(`order ${order.orderId} has no checkout`);
  return url;
}
