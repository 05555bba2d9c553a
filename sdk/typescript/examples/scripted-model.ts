// A scripted stand-in for a real model (the AI SDK's own mock from `ai/test`):
// first it calls `code` with the invoices program, then it answers from the
// tool's output. Swap in any real model (openai("..."), anthropic("...")).
import * as aiTest from "ai/test";

export const INVOICES_PROGRAM = `const [invoices, firms] = await Promise.all([
  tools.listInvoices({ month: "2026-08" }),
  tools.listFirms({}),
]);
const names = new Map(firms.map((firm) => [firm.id, firm.name]));
const totals = new Map();
for (const invoice of invoices) {
  if (invoice.status !== "paid") continue;
  totals.set(invoice.firmId, (totals.get(invoice.firmId) ?? 0) + invoice.amountCents);
}
return [...totals]
  .map(([firmId, cents]) => ({ firm: names.get(firmId), cents }))
  .sort((a, b) => b.cents - a.cents)
  .slice(0, 3);`;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 },
};

// ai 7 exports MockLanguageModelV4, ai 6 MockLanguageModelV3; both take this shape.
const Mock = ((aiTest as Record<string, unknown>).MockLanguageModelV4 ??
  (aiTest as Record<string, unknown>).MockLanguageModelV3) as new (o: object) => any;

/** What the model was shown, for tests: the `code` tool's description, and the tool output it read. */
export const seen: { description?: string; output?: unknown } = {};

export function scriptedModel(): any {
  return new Mock({
    doGenerate: async (options: { prompt: any[]; tools?: any[] }) => {
      const toolMsg = options.prompt.find((m) => m.role === "tool");
      if (!toolMsg) {
        seen.description = options.tools?.find((t) => t.name === "code")?.description;
        return {
          content: [{
            type: "tool-call", toolCallId: "call-1", toolName: "code",
            input: JSON.stringify({ reason: "Ranking firms by paid invoices in August", js: INVOICES_PROGRAM }),
          }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      const out = toolMsg.content[0].output;
      seen.output = out.value;
      const rows = out.value?.result as Array<{ firm: string; cents: number }> | undefined;
      const text = rows
        ? "Top firms by paid invoices, August 2026: " +
          rows.map((r) => `${r.firm} ($${(r.cents / 100).toFixed(2)})`).join(", ") + "."
        : `The program failed: ${JSON.stringify(out.value?.error)}`;
      return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}
