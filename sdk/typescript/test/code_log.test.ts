// codeModeTool's onLog carries the execution and the AI SDK's tool-call id,
// so two `code` calls running at once can be told apart; its description
// (and the declarations in it) says that they share the workspace.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Codepod } from "@codepod/client";
import { codeModeTool, type CodeLog } from "@codepod/client/ai";
import { open, TRANSPORTS, type Fixture } from "./helpers.ts";

const conv = (t: string) => `sdk-ts-codelog-${t}-${process.pid}`;
const noTools = { ping: { inputSchema: { type: "object" }, execute: async () => "pong" } };

for (const transport of TRANSPORTS) {
  describe(`codeModeTool's onLog over ${transport}`, () => {
    let fx: Fixture;
    let cp: Codepod;
    before(async () => {
      fx = await open(transport);
      cp = fx.codepod;
    });
    after(async () => { await fx.close(); });

    test("two code calls at once: every log line names its execution and its tool call", async () => {
      const logs: CodeLog[] = [];
      const code = await codeModeTool({ codepod: cp, conversation: conv("two"), tools: noTools, onLog: (l) => logs.push(l) });
      const js = (tag: string) =>
        `for (let i = 0; i < 3; i++) { console.log('${tag}' + i); await new Promise((r) => setTimeout(r, 30)); } ` +
        `process.stderr.write('${tag}-err\\n'); return '${tag}';`;
      const outs = await Promise.all([
        code.execute!({ reason: "a", js: js("a") }, { toolCallId: "call-a", messages: [] } as never),
        code.execute!({ reason: "b", js: js("b") }, { toolCallId: "call-b", messages: [] } as never),
      ]);
      assert.deepEqual(outs.map((o) => (o as { result: unknown }).result), ["a", "b"]);
      for (const tag of ["a", "b"]) {
        const mine = logs.filter((l) => l.toolCallId === `call-${tag}`);
        assert.equal(mine.map((l) => l.stream === "stdout" ? l.text : "").join(""), `${tag}0\n${tag}1\n${tag}2\n`);
        assert.equal(mine.filter((l) => l.stream === "stderr").map((l) => l.text).join(""), `${tag}-err\n`);
        const ids = new Set(mine.map((l) => l.executionId));
        assert.equal(ids.size, 1, "one execution per call");
        assert.match([...ids][0]!, /^[0-9a-f-]{36}$/);
      }
      assert.notEqual(logs.find((l) => l.toolCallId === "call-a")!.executionId,
        logs.find((l) => l.toolCallId === "call-b")!.executionId);
    });

    test("an onLog of two parameters still gets (stream, text)", async () => {
      const got: string[] = [];
      const code = await codeModeTool({
        codepod: cp, conversation: conv("legacy"), tools: noTools,
        // as untyped JavaScript written for the older form would pass it
        onLog: ((stream: string, text: string) => { got.push(`${stream}:${text}`); }) as never,
      });
      await code.execute!({ reason: "r", js: "console.log('hi'); return 1;" }, { toolCallId: "t", messages: [] } as never);
      assert.deepEqual(got, ["stdout:hi\n"]);
    });

    test("the description says concurrent code calls share the workspace, in the rules and the declarations", async () => {
      const code = await codeModeTool({ codepod: cp, conversation: conv("desc"), tools: noTools });
      assert.match(String(code.description), /Several `code` calls of this conversation may run at the same time .* share the workspace/);
      assert.match(String(code.description), /Programs of one\n \* conversation may run at the same time, and then share its workspace/);
    });
  });
}
