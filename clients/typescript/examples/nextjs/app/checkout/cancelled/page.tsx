// app/checkout/cancelled/page.tsx: where Tally sends a buyer who cancelled at the provider.
import Link from "next/link";

export default async function CheckoutCancelled({ searchParams }: { searchParams: Promise<{ orderId?: string }> }) {
  const { orderId } = await searchParams;
  return (
    <>
      <h1 data-testid="checkout-cancelled">Checkout cancelled</h1>
      <p>Nothing was charged{orderId ? ` (order ${orderId})` : ""}.</p>
      <Link href="/pricing">Back to pricing</Link>
    </>
  );
}
