// app/api/image/route.ts: one image costs a fixed price; the client's job id makes a retry spend once.
import { currentUser } from "@/lib/session";
import { chargeImage } from "@/lib/spend";

export async function POST(request: Request): Promise<Response> {
  const user = await currentUser();
  if (user === undefined) return new Response("Sign in first", { status: 401 });
  const { jobId } = (await request.json()) as { jobId: string };
  const charged = await chargeImage(user, jobId);
  if (!charged.ok) return charged;
  // … make the image here, then answer with it.
  return charged;
}
