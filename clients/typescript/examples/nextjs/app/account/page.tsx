// app/account/page.tsx: the user's subscriptions and credits, with cancel and the billing portal.
import { cancelSubscription, openBillingPortal } from "@/app/actions/billing";
import { accountSummary } from "@/lib/account";
import { requireUser } from "@/lib/session";
import { tallyAs } from "@/lib/tally";

export default async function Account() {
  const user = await requireUser();
  const [{ items: subscriptions }, summary] = await Promise.all([tallyAs(user).listSubscriptions(), accountSummary(user)]);
  return (
    <>
      <h1>Your account</h1>
      <p data-testid="credits">{summary.credits} credits</p>
      {subscriptions.map((subscription) => (
        <section key={subscription.id} data-testid={`subscription-${subscription.planId}`}>
          <p>
            {subscription.planId}: {subscription.status}
            {subscription.cancelAtPeriodEnd
              ? `, ends ${subscription.currentPeriodEnd}`
              : `, renews ${subscription.currentPeriodEnd}`}
          </p>
          {subscription.status !== "canceled" && !subscription.cancelAtPeriodEnd && (
            <form action={cancelSubscription}>
              <input type="hidden" name="subscriptionId" value={subscription.id} />
              <button type="submit" data-testid="cancel-subscription">
                Cancel at the end of the period
              </button>
            </form>
          )}
        </section>
      ))}
      <form action={openBillingPortal}>
        <button type="submit" data-testid="billing-portal">
          Manage billing
        </button>
      </form>
    </>
  );
}
