// The sandbox examples (examples/sandbox/) run as a backend would run them,
// on both transports: bash-tool's createBashTool and a ToolLoopAgent with
// experimental_sandbox, each with a scripted model, against a real codepod
// serve; and codeModeTool telling the model which files the workspace holds.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { codeModeTool } from "@codepod/client/ai";
import { BIN, HAVE_COMMANDS, HAVE_FILES, open, startServer, tempDir, TRANSPORTS } from "./helpers.ts";

const here = dirname(fileURLToPath(import.meta.url));
const examples = join(here, "..", "examples", "sandbox");
const ready = HAVE_COMMANDS && HAVE_FILES;
const desc = (t: { description?: unknown }) => String(t.description);

function run(file: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(examples, file)], { env: { ...process.env, ...env }, timeout: 90_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  });
}

async function onEach(transport: string, file: string): Promise<string> {
  const conversation = `sdk-ts-example-${file}-${process.pid}-${transport}`;
  if (transport === "stdio") {
    const state = mkdtempSync(join(tmpdir(), "codepod-sdk-sb-example-"));
    try {
      return await run(file, { CODEPOD_BIN: BIN, CODEPOD_URL: "", CODEPOD_CONVERSATION: conversation,
        CODEPOD_STATE_DIR: state });
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }
  const dir = tempDir("sb-example");
  const srv = await startServer(dir);
  try {
    return await run(file, { CODEPOD_URL: srv.url, CODEPOD_TOKEN: srv.token, CODEPOD_CONVERSATION: conversation });
  } finally {
    const rc = await srv.stop();
    rmSync(dir, { recursive: true, force: true });
    assert.equal(rc, 0, `codepod serve exited ${rc}`);
  }
}

for (const transport of TRANSPORTS) {
  describe(`the sandbox examples over ${transport}`, () => {
    test("bash-tool-agent.ts: createBashTool({ sandbox }) totals a CSV with awk and reads the result", { skip: !ready }, async () => {
      const out = await onEach(transport, "bash-tool-agent.ts");
      assert.equal(out, "Totals by region: east 5; north 150; south 80.\n");
    });

    test("sandbox-agent.ts: a ToolLoopAgent's shell and code tools on one workspace", { skip: !ready }, async () => {
      const out = await onEach(transport, "sandbox-agent.ts");
      const [answer, summary] = out.trimEnd().split("\n");
      assert.equal(answer, "sales.csv has 3 rows totalling 230.");
      assert.deepEqual(JSON.parse(summary!), { rows: 3, total: 230 });
    });

    test("codeModeTool's workspaceFiles names the workspace's files in the description", async () => {
      const fx = await open(transport);
      try {
        const conversation = `sdk-ts-wsfiles-${transport}-${process.pid}`;
        const listed = await codeModeTool({ codepod: fx.codepod, conversation, tools: {}, workspaceFiles: ["in/sales.csv", "notes.md"] });
        assert.match(desc(listed), /^- The workspace already holds these files \(paths relative to it\): `in\/sales.csv`, `notes.md`\.$/m);
        const many = Array.from({ length: 60 }, (_, i) => `f${i}.txt`);
        const long = await codeModeTool({ codepod: fx.codepod, conversation, tools: {}, workspaceFiles: many });
        assert.match(desc(long), /`f49.txt`, and 10 more\.$/m);
        assert.doesNotMatch(desc(long), /f50\.txt/);
        const none = await codeModeTool({ codepod: fx.codepod, conversation, tools: {} });
        assert.doesNotMatch(desc(none), /already holds/);
        if (HAVE_FILES) {
          const sb = fx.codepod.sandbox(conversation);
          await sb.writeTextFile({ path: "in/sales.csv", content: "a\n" });
          await sb.writeTextFile({ path: "top.txt", content: "b\n" });
          const found = await codeModeTool({ codepod: fx.codepod, conversation, tools: {}, workspaceFiles: true });
          assert.match(desc(found), /holds these files \(paths relative to it\): `top.txt`, `in\/sales.csv`\.$/m);
        }
      } finally {
        await fx.close();
      }
    });
  });
}
