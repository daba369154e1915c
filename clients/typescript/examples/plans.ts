// app/pricing/plans.ts: your pricing page's data; each card's button starts startCheckout (section 4).
import { tally } from "./lib/tally.js";

export interface PriceCard {
  planId: string;
  provider: string;
  name: string;
  price: string; // "4.99 USD": amounts are decimal strings, never floats
  credits: string | undefined; // credits granted (credit packs, subscriptions' periods)
  recurring: boolean;
  features: string[];
}

export async function priceCards(locale = "en"): Promise<PriceCard[]> {
  const plans = await tally.plans.list({ locale });
  return plans.map((plan) => ({
    planId: plan.id,
    provider: plan.provider,
    name: plan.text.name,
    price: `${plan.amount} ${plan.currency}`,
    credits: plan.duration.credits,
    recurring: plan.duration.type === "recurring",
    features: plan.text.features,
  }));
}
