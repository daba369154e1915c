// app/sign-in/page.tsx: the demo sign-in form (your app has its own).
import { signInWithEmail } from "@/app/actions/session";

export default function SignIn() {
  return (
    <form action={signInWithEmail}>
      <label>
        E-mail <input name="email" type="email" required />
      </label>
      <button type="submit">Sign in</button>
    </form>
  );
}
