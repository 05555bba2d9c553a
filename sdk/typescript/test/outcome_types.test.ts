// The outcome's types (src/types.ts) name exactly the keys of
// broker/schema/outcome.schema.json: each table below must list every key of
// its type and no other (the compiler checks that: `Record<keyof T, ...>`),
// and the test checks the table against the schema, so a key codepod starts
// sending, or one the types promise that codepod does not have, fails here.
// Required keys: a key the schema requires is not optional in the type
// (except `usage`, which the client's own outcomes lack when the link was
// lost before the result came).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import type { CallRecord, Outcome, OutcomeError, PendingCall, ProgramError, Usage } from "@codepod/client";
import { SCHEMA_DIR } from "./helpers.ts";

// The compiler checks each entry: "optional" exactly when the type's key is.
type Table<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? "optional" : "required" };

const outcome: Table<Outcome> = {
  executionId: "required", status: "required", pending: "optional", continuation: "optional",
  result: "optional", logs: "required", logsTruncated: "required", error: "optional",
  calls: "required", callsOmitted: "optional", usage: "optional",
};
const usage: Table<Usage> = {
  bridgeRequests: "required", startupMs: "required", runMs: "required", sandbox: "required",
  digest: "required", wallMs: "optional", cpuMs: "optional", maxRssBytes: "optional",
  restoreMs: "optional", runs: "optional", toolCalls: "optional", toolInputBytes: "optional",
  toolOutputBytes: "optional", logBytes: "optional", resultBytes: "optional",
};
const error: Table<OutcomeError> = { code: "required", message: "required", programError: "optional" };
const programError: Table<ProgramError> = { name: "required", message: "required", stack: "required" };
const call: Table<CallRecord> = {
  id: "required", tool: "required", status: "required", ms: "required", broker: "optional",
  reason: "optional",
};
const pending: Table<PendingCall> = { call: "required", tool: "required", input: "required" };

// Usage figures added after 1.0 stay optional in the type (an older codepod
// does not send them); the schema requires them of this codepod.
const LATER = new Set(["usage.wallMs", "usage.toolCalls", "usage.toolInputBytes",
  "usage.toolOutputBytes", "usage.logBytes", "usage.resultBytes", "outcome.usage"]);

interface Obj { properties: Record<string, Obj>; required?: string[]; items?: Obj }
const schema = JSON.parse(readFileSync(join(SCHEMA_DIR, "outcome.schema.json"), "utf8")) as Obj;
const prop = (s: Obj, k: string): Obj => {
  const v = s.properties[k];
  assert.ok(v, `the schema has ${k}`);
  return v;
};

for (const [name, table, s] of [
  ["outcome", outcome, schema], ["usage", usage, prop(schema, "usage")],
  ["error", error, prop(schema, "error")],
  ["programError", programError, prop(prop(schema, "error"), "programError")],
  ["call", call, prop(schema, "calls").items!], ["pending", pending, prop(schema, "pending").items!],
] as [string, Record<string, string>, Obj][]) {
  test(`${name}: the type's keys are the schema's`, () => {
    assert.deepEqual(Object.keys(table).sort(), Object.keys(s.properties).sort());
    for (const k of s.required ?? []) {
      if (!LATER.has(`${name}.${k}`))
        assert.equal(table[k], "required", `${name}.${k} is required by the schema`);
    }
    for (const [k, v] of Object.entries(table))
      if (v === "required") assert.ok((s.required ?? []).includes(k), `${name}.${k} is optional in the schema`);
  });
}
