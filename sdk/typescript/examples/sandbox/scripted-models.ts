// Scripted stand-ins for a real model (the AI SDK's own mock from `ai/test`)
// for the two sandbox examples: each plays its tool calls in order, reading
// what the previous one returned, then answers from the last output. Swap in
// any real model (openai("..."), anthropic("...")).
import * as aiTest from "ai/test";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 },
};
const Mock = ((aiTest as Record<string, unknown>).MockLanguageModelV4 ??
  (aiTest as Record<string, unknown>).MockLanguageModelV3) as new (o: object) => any;

/** What the models were shown, for tests: each tool's description, and every tool output they read. */
export const seen: { descriptions: Record<string, string>; outputs: unknown[]; system?: string } = { descriptions: {}, outputs: [] };

type Step = { tool: string; input: unknown } | { answer: (outputs: any[]) => string };

function scripted(steps: Step[]): any {
  return new Mock({
    doGenerate: async (options: { prompt: any[]; tools?: any[] }) => {
      for (const t of options.tools ?? []) seen.descriptions[t.name] = t.description;
      const sys = options.prompt.find((m) => m.role === "system");
      if (sys) seen.system = sys.content;
      const outputs = options.prompt.filter((m) => m.role === "tool").map((m) => m.content[0].output.value);
      seen.outputs = outputs;
      const step = steps[outputs.length]!;
      if ("tool" in step) {
        return {
          content: [{ type: "tool-call", toolCallId: `call-${outputs.length + 1}`, toolName: step.tool, input: JSON.stringify(step.input) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      return { content: [{ type: "text", text: step.answer(outputs) }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
}

/** bash-tool's tools: totals a CSV with awk, then reads a file it wrote. */
export function bashModel(): any {
  return scripted([
    { tool: "bash", input: { command: "awk -F, 'NR > 1 { t[$1] += $2 } END { for (r in t) print r, t[r] }' sales.csv | sort > totals.txt; cat totals.txt" } },
    { tool: "readFile", input: { path: "totals.txt" } },
    { answer: (o) => `Totals by region: ${String(o[1].content).trim().split("\n").join("; ")}.` },
  ]);
}

export const SUMMARY_PROGRAM = `const fs = require("node:fs");
const rows = fs.readFileSync("sales.csv", "utf8").trim().split("\\n").slice(1).map((l) => l.split(","));
const total = rows.reduce((s, [, amount]) => s + Number(amount), 0);
fs.writeFileSync("summary.json", JSON.stringify({ rows: rows.length, total }));
return { rows: rows.length, total };`;

/** A ToolLoopAgent's tools: a shell command, then a program, then the answer. */
export function agentModel(): any {
  return scripted([
    { tool: "shell", input: { command: "wc -l < sales.csv" } },
    { tool: "code", input: { reason: "Totalling the sales", js: SUMMARY_PROGRAM } },
    { answer: (o) => `sales.csv has ${Number(String(o[0].stdout).trim()) - 1} rows totalling ${o[1].result.total}.` },
  ]);
}
