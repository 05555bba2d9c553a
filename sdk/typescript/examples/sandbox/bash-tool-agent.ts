// bash-tool on codepod: createBashTool({ sandbox }) gives the model `bash`,
// `readFile` and `writeFile`, all running in the conversation's sandbox
// (files in /workspace, commands with no network, a deadline each).
//
//   node examples/sandbox/bash-tool-agent.ts          (serve --stdio as a child; CODEPOD_BIN names it)
//   CODEPOD_URL=http://127.0.0.1:8080 CODEPOD_TOKEN=... node examples/sandbox/bash-tool-agent.ts
import { generateText } from "ai";
import { createBashTool } from "bash-tool";
import { Codepod } from "@codepod/client";
import { bashModel } from "./scripted-models.ts";

const codepod = process.env.CODEPOD_URL
  ? await Codepod.connect({ url: process.env.CODEPOD_URL, token: process.env.CODEPOD_TOKEN ?? "" })
  : await Codepod.spawn({ command: process.env.CODEPOD_BIN ?? "codepod", args: ["serve", "--stdio"] });
const sandbox = codepod.sandbox(process.env.CODEPOD_CONVERSATION ?? "thread-7");
const { tools } = await createBashTool({
  sandbox,
  files: { "sales.csv": "region,amount\nnorth,120\nsouth,80\nnorth,30\neast,5\n" },
});
const { text } = await generateText({
  model: bashModel(), tools, stopWhen: ({ steps }) => steps.length >= 4,
  prompt: "What are the sales totals by region in sales.csv?",
});
console.log(text);
await codepod.close();
