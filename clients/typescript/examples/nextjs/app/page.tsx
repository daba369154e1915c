// app/page.tsx: the home page: who is signed in.
import Link from "next/link";
import { signOutNow } from "@/app/actions/session";
import { currentUser } from "@/lib/session";

export default async function Home() {
  const user = await currentUser();
  if (user === undefined) return <Link href="/sign-in">Sign in</Link>;
  return (
    <form action={signOutNow}>
      <p data-testid="signed-in">Signed in as {user.email}</p>
      <button type="submit">Sign out</button>
    </form>
  );
}
