// app/pricing/page.tsx: your pricing page from Tally's offers, grouped as Tally's own /pricing.
import Link from "next/link";
import type { Offer } from "@tally/client";
import { startCheckout } from "@/app/actions/checkout";
import { currentUser } from "@/lib/session";
import { tally, tallyAs } from "@/lib/tally";

export default async function Pricing({ searchParams }: { searchParams: Promise<{ interval?: string }> }) {
  const { interval = "month" } = await searchParams;
  const user = await currentUser();
  // As the user, each offer also says what they hold (`held`); signed out, the offers alone.
  const { offers, intervals } = await (user ? tallyAs(user) : tally()).offers({ locale: "en" });
  // One card per offer and interval: subscriptions at the chosen interval, one-time plans and credit packs always.
  const shown = offers.filter((offer) => offer.type !== "recurring" || offer.interval === interval);
  return (
    <>
      <h1>Pricing</h1>
      <nav>
        {intervals.map((i) => (
          <Link key={i} href={`/pricing?interval=${i}`}>
            {i}{" "}
          </Link>
        ))}
      </nav>
      {shown.map((offer) => (
        <PriceCard key={`${offer.key}:${offer.interval}`} offer={offer} signedIn={user !== undefined} />
      ))}
    </>
  );
}

function PriceCard({ offer, signedIn }: { offer: Offer; signedIn: boolean }) {
  return (
    <section data-testid={`offer-${offer.key}-${offer.interval}`}>
      <h2>{offer.text.name}</h2>
      <p>
        {offer.originalPrice && <del>{offer.originalPrice.amount} </del>}
        {offer.price.amount} {offer.price.currency}
        {offer.price.amountMinor !== offer.productionPrice.amountMinor && ` (test price; ${offer.productionPrice.amount} live)`}
        {offer.savingPercent && ` · save ${offer.savingPercent}%`}
      </p>
      <ul>
        {offer.text.features.map((feature) => (
          <li key={feature}>{feature}</li>
        ))}
      </ul>
      {offer.held === "current" || offer.held === "owned" ? (
        <Link href="/account">Yours: manage it</Link>
      ) : signedIn ? (
        offer.options.map((option) => (
          <form key={option.planId} action={startCheckout}>
            <input type="hidden" name="planId" value={option.planId} />
            <input type="hidden" name="provider" value={option.provider} />
            {/* One checkout per rendered button: a double click starts it once. */}
            <input type="hidden" name="checkoutKey" value={crypto.randomUUID()} />
            <button type="submit" data-testid={`buy-${option.planId}`}>
              Pay {option.price.amount} {option.price.currency} with {option.provider}
            </button>
          </form>
        ))
      ) : (
        <Link href="/sign-in">Sign in to buy</Link>
      )}
    </section>
  );
}
