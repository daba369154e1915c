// app/api/chat/route.ts: a streamed answer, paid per token (reserve, stream, settle).
import { openai } from "@ai-sdk/openai";
import { chat } from "@/lib/chat";
import { currentUser } from "@/lib/session";

export async function POST(request: Request): Promise<Response> {
  const user = await currentUser();
  if (user === undefined) return new Response("Sign in first", { status: 401 });
  const { prompt } = (await request.json()) as { prompt: string };
  // The request id names the reservation: a retried request reserves once.
  const requestId = request.headers.get("x-request-id") ?? crypto.randomUUID();
  return chat(user, requestId, prompt, openai("gpt-4o"), "gpt-4o");
}
