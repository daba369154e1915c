// app/layout.tsx: the demo app's frame.
import Link from "next/link";
import type { ReactNode } from "react";

export const metadata = { title: "Demo app, billed by Tally" };

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <nav>
          <Link href="/">Home</Link> · <Link href="/pricing">Pricing</Link> · <Link href="/account">Account</Link>
        </nav>
        <main>{children}</main>
      </body>
    </html>
  );
}
