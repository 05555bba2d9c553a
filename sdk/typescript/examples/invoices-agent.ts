// The invoices agent: a Vercel AI SDK backend whose model gets one tool,
// `code`, running its programs in codepod with the backend's own tools.
//
//   node examples/invoices-agent.ts          (codepod serve --stdio as a child; CODEPOD_BIN names it)
//   CODEPOD_URL=http://127.0.0.1:8080 CODEPOD_TOKEN=... node examples/invoices-agent.ts
//
// The lines between the integration markers are all the backend writes for
// codepod, besides its tools (invoices-tools.ts) and its model: 15, the
// generateText call and the imports included (test/ai.test.ts counts them).
import { generateText } from "ai";
import { listFirms, listInvoices } from "./invoices-tools.ts";
import { scriptedModel } from "./scripted-model.ts";
// --- integration: begin
import { Codepod } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";

const codepod = process.env.CODEPOD_URL
  ? await Codepod.connect({ url: process.env.CODEPOD_URL, token: process.env.CODEPOD_TOKEN ?? "" })
  : await Codepod.spawn({ command: process.env.CODEPOD_BIN ?? "codepod", args: ["serve", "--stdio"] });
const code = await codeModeTool({
  codepod, conversation: "thread-42", tools: { listInvoices, listFirms },
  policy: { timeoutMs: 10_000 },
});
const { text } = await generateText({
  model: scriptedModel(), tools: { code }, stopWhen: ({ steps }) => steps.length >= 4,
  prompt: "Which three firms had the highest paid invoice totals in August 2026?",
});
console.log(text);
await codepod.close();
// --- integration: end
