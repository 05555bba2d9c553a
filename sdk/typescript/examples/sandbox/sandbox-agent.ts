// The AI SDK 7's sandbox on codepod: a ToolLoopAgent given the
// conversation's sandbox as `experimental_sandbox`, so any tool reaches it
// from its execute options; here a `shell` tool beside codepod's `code` tool,
// which is told what the workspace holds. A file uploaded first, a command
// and a program on the same files, the program's output downloaded last.
//
//   node examples/sandbox/sandbox-agent.ts            (serve --stdio as a child; CODEPOD_BIN names it)
//   CODEPOD_URL=http://127.0.0.1:8080 CODEPOD_TOKEN=... node examples/sandbox/sandbox-agent.ts
import { jsonSchema, tool, ToolLoopAgent } from "ai";
import { Codepod } from "@codepod/client";
import { codeModeTool } from "@codepod/client/ai";
import { agentModel } from "./scripted-models.ts";

const codepod = process.env.CODEPOD_URL
  ? await Codepod.connect({ url: process.env.CODEPOD_URL, token: process.env.CODEPOD_TOKEN ?? "" })
  : await Codepod.spawn({ command: process.env.CODEPOD_BIN ?? "codepod", args: ["serve", "--stdio"] });
const conversation = process.env.CODEPOD_CONVERSATION ?? "thread-8";
const sandbox = codepod.sandbox(conversation, { policy: { timeoutMs: 10_000 } });
await sandbox.writeTextFile({ path: "sales.csv", content: "region,amount\nnorth,120\nsouth,80\nnorth,30\n" });

const shell = tool({
  description: "Run a shell command in the sandbox; returns its exit code, stdout and stderr.",
  inputSchema: jsonSchema<{ command: string }>({ type: "object", properties: { command: { type: "string" } }, required: ["command"] }),
  execute: async ({ command }, { experimental_sandbox }) => experimental_sandbox!.run({ command }),
});
const code = await codeModeTool({ codepod, conversation, tools: {}, workspaceFiles: true });
const agent = new ToolLoopAgent({
  model: agentModel(), tools: { shell, code }, instructions: sandbox.description, stopWhen: ({ steps }) => steps.length >= 5,
});
const { text } = await agent.generate({ prompt: "How many sales rows are there, and what is their total?", experimental_sandbox: sandbox });
console.log(text);
console.log(await sandbox.readTextFile({ path: "/workspace/summary.json" }));
await codepod.close();
