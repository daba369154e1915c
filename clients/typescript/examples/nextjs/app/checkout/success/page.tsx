// app/checkout/success/page.tsx: where Tally sends the buyer after paying; the order, read as the buyer, says how it went.
import Link from "next/link";
import { requireUser } from "@/lib/session";
import { tallyAs } from "@/lib/tally";

export default async function CheckoutSuccess({ searchParams }: { searchParams: Promise<{ orderId?: string }> }) {
  const user = await requireUser();
  const { orderId } = await searchParams;
  if (orderId === undefined) return <p>No order to show.</p>;
  // `outcome` in the address is a hint; the order is the truth (and another user's is refused).
  const order = await tallyAs(user).getOrder(orderId);
  if (order.status === "pending") {
    // The provider's signed webhook has not reached Tally yet: look again in a moment.
    return (
      <>
        <meta httpEquiv="refresh" content="1" />
        <h1 data-testid="order-pending">Confirming your payment…</h1>
      </>
    );
  }
  return (
    <>
      <h1 data-testid="order-status">{order.status === "paid" ? "Thank you!" : `Payment ${order.status}`}</h1>
      <p>
        Order {order.orderId}: {order.planId}
      </p>
      <Link href="/account">Your account</Link>
    </>
  );
}
