// An agent whose program needs a person's yes before it pays: the program
// reads the open invoices and pays the largest; the payment tool has
// `needsApproval`, so the code tool's run stops there (suspended, holding
// nothing) and the model is told it waits. Once the person approved,
// `codepod.resume` runs the program again from the start: the read is
// answered from codepod's log and the payment runs once.
//
//   node examples/approval-agent.ts          (codepod serve --stdio as a child; CODEPOD_BIN names it)
//
// The model and the person are scripted stand-ins. The AI SDK's own approval
// flow (tool-approval-request) covers the tools a model calls directly, not
// the ones a program calls from inside the code tool, so the pending calls
// come back in the code tool's output and through onSuspended.
import { generateText, tool, jsonSchema } from "ai";
import * as aiTest from "ai/test";
import { Codepod, type Decision, type Outcome } from "@codepod/client";
import { codeModeTool, type CodeInput } from "@codepod/client/ai";

const open = [{ id: "INV-7", firm: "Acme", cents: 125000 }, { id: "INV-9", firm: "Globex", cents: 48000 }];
const payments = new Map<string, string>(); // idempotency key -> reference: a repeat pays nothing new

const listOpenInvoices = tool({
  description: "The open invoices; amounts in cents.",
  inputSchema: jsonSchema<Record<string, never>>({ type: "object", properties: {}, additionalProperties: false }),
  execute: async () => open,
});
const payInvoice = tool({
  description: "Pay one invoice by its id.",
  inputSchema: jsonSchema<{ id: string }>({ type: "object", properties: { id: { type: "string" } }, required: ["id"] }),
  needsApproval: async ({ id }: { id: string }) => open.some((i) => i.id === id && i.cents > 100000),
  execute: async ({ id }: { id: string }, options: { toolCallId: string; idempotencyKey?: string }) => {
    const key = options.idempotencyKey ?? options.toolCallId;
    if (!payments.has(key)) payments.set(key, `PAY-${payments.size + 1} for ${id}`);
    return { ref: payments.get(key)! };
  },
});

const PROGRAM = `const invoices = await tools.listOpenInvoices({});
const largest = invoices.reduce((a, b) => (b.cents > a.cents ? b : a));
const paid = await tools.payInvoice({ id: largest.id });
return { invoice: largest.id, ref: paid.ref };`;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 },
};
const Mock = ((aiTest as Record<string, unknown>).MockLanguageModelV4 ??
  (aiTest as Record<string, unknown>).MockLanguageModelV3) as new (o: object) => any;
const model = new Mock({
  doGenerate: async (options: { prompt: any[] }) => {
    const toolMsg = options.prompt.find((m) => m.role === "tool");
    if (!toolMsg) {
      return {
        content: [{ type: "tool-call", toolCallId: "call-1", toolName: "code",
          input: JSON.stringify({ reason: "Paying the largest open invoice", js: PROGRAM }) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
      };
    }
    const out = toolMsg.content[0].output.value as { status: string; pending?: { tool: string }[] };
    const text = out.status === "suspended"
      ? `Waiting for your approval of ${out.pending!.map((p) => p.tool).join(", ")}.`
      : `Done: ${JSON.stringify(out)}`;
    return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
  },
});

/** The approval UI: here, yes to every pending call. */
const person = (o: Outcome): Decision[] => o.pending!.map((p) => ({ call: p.call, approved: true }));

const codepod = await Codepod.spawn({ command: process.env.CODEPOD_BIN ?? "codepod", args: ["serve", "--stdio"] });
const tools = { listOpenInvoices, payInvoice };
let suspended: { outcome: Outcome; input: CodeInput } | undefined;
const code = await codeModeTool({
  codepod, conversation: "thread-7", tools,
  onSuspended: (outcome, input) => { suspended = { outcome, input }; },
});
const { text } = await generateText({ model, tools: { code }, stopWhen: ({ steps }) => steps.length >= 3,
  prompt: "Pay our largest open invoice." });
console.log(text);
while (suspended) { // a person decides, possibly much later
  const { outcome, input } = suspended;
  suspended = undefined;
  const next = await codepod.resume({ conversation: "thread-7", js: input.js, tools,
    continuation: outcome.continuation!, decisions: person(outcome) });
  if (next.status === "suspended") suspended = { outcome: next, input };
  else console.log(`${next.status}: ${JSON.stringify(next.result)}`);
}
console.log(`payments made: ${payments.size}`);
await codepod.close();
