// Tools as the client runs them: a declaration for codepod, an input check
// and an execute function, whether the backend gave a plain tool or a Vercel
// AI SDK tool() object.
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv";
import type { JsonSchema, NeedsApproval, ToolContext, ToolDeclaration, Tools } from "./types.js";

export type Check = { ok: true } | { ok: false; message: string };

export interface RunnableTool {
  decl: ToolDeclaration;
  check(input: unknown): Promise<Check>;
  execute(input: unknown, ctx: ToolContext): Promise<unknown>;
  /** A function of the input: asked before each call not yet approved. */
  needsApproval?: (input: unknown, ctx: ToolContext) => Promise<boolean>;
}

const AI_SCHEMA = Symbol.for("vercel.ai.schema");

/** A schema only the AI SDK can read (zod, Standard Schema, jsonSchema(), lazy). */
function isAiSchema(s: unknown): boolean {
  if (typeof s === "function") return true;
  if (s === null || typeof s !== "object") return false;
  return AI_SCHEMA in s || "~standard" in s || "_zod" in s || "_def" in s;
}

interface AiSchema {
  jsonSchema: JsonSchema | PromiseLike<JsonSchema>;
  validate?: (v: unknown) => { success: true; value: unknown } | { success: false; error: Error } |
    PromiseLike<{ success: true; value: unknown } | { success: false; error: Error }>;
}

let aiModule: Promise<{ asSchema(s: unknown): AiSchema }> | undefined;
function loadAi() {
  aiModule ??= import("ai" as string).catch(() => {
    throw new Error("a tool's schema is a zod or AI SDK schema: install the `ai` package to use it");
  }) as Promise<{ asSchema(s: unknown): AiSchema }>;
  return aiModule;
}

const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
const compiled = new WeakMap<object, ValidateFunction | Error>();

/** A validator for a plain JSON Schema (draft 2020-12 rules; `$schema` ignored). */
function jsonSchemaCheck(schema: JsonSchema): (input: unknown) => Check {
  if (typeof schema === "boolean") {
    return () => (schema ? { ok: true } : { ok: false, message: "this tool accepts no input" });
  }
  let v = compiled.get(schema);
  if (!v) {
    const { $schema: _ignored, $id: _id, ...rest } = schema;
    try {
      v = ajv.compile(rest);
    } catch (e) {
      v = e instanceof Error ? e : new Error(String(e));
    }
    compiled.set(schema, v);
  }
  const fn = v;
  return (input) => {
    // A schema Ajv cannot compile is codepod's to refuse; do not block calls on it.
    if (fn instanceof Error) return { ok: true };
    if (fn(input)) return { ok: true };
    const e = fn.errors?.[0];
    const where = e?.instancePath ? `input${e.instancePath.replace(/\//g, ".")}` : "input";
    return { ok: false, message: `${where} ${e?.message ?? "does not match the schema"}` };
  };
}

export async function prepareTools(tools: Tools | undefined): Promise<Map<string, RunnableTool>> {
  const out = new Map<string, RunnableTool>();
  for (const [name, t] of Object.entries(tools ?? {})) {
    if (!t || typeof t !== "object") throw new TypeError(`tool ${name}: not an object`);
    const exec = (t as { execute?: unknown }).execute;
    if (typeof exec !== "function") throw new TypeError(`tool ${name}: needs an execute function`);
    const description = typeof t.description === "string" ? t.description : undefined;
    let inputSchema: JsonSchema;
    let outputSchema: JsonSchema | undefined;
    let check: (input: unknown) => Check | Promise<Check>;
    if (isAiSchema(t.inputSchema)) {
      const ai = await loadAi();
      const s = ai.asSchema(t.inputSchema);
      inputSchema = await s.jsonSchema;
      const validate = s.validate;
      const plain = jsonSchemaCheck(inputSchema);
      check = validate
        ? async (input) => {
          const r = await validate(input);
          return r.success ? { ok: true } : { ok: false, message: firstLine(r.error?.message) };
        }
        : plain;
    } else {
      inputSchema = t.inputSchema as JsonSchema;
      if (inputSchema === undefined) throw new TypeError(`tool ${name}: needs an inputSchema`);
      check = jsonSchemaCheck(inputSchema);
    }
    const os = (t as { outputSchema?: unknown }).outputSchema;
    if (os !== undefined) {
      outputSchema = isAiSchema(os) ? await (await loadAi()).asSchema(os).jsonSchema : (os as JsonSchema);
    }
    const enabled = (t as { enabled?: unknown }).enabled;
    const decl: ToolDeclaration = { name, inputSchema };
    if (description !== undefined) decl.description = description;
    if (outputSchema !== undefined) decl.outputSchema = outputSchema;
    if (enabled === false) decl.enabled = false;
    // true: codepod holds every call itself; a function decides per call.
    const na = (t as { needsApproval?: NeedsApproval }).needsApproval;
    if (na === true) decl.approval = "required";
    const rt: RunnableTool = {
      decl,
      check: async (input) => check(input),
      execute: (input, ctx) => lastValue((exec as (i: unknown, c: ToolContext) => unknown).call(t, input, ctx)),
    };
    if (typeof na === "function") rt.needsApproval = async (input, ctx) => Boolean(await na.call(t, input, ctx));
    out.set(name, rt);
  }
  return out;
}

/** A zod error's message can be a JSON dump of its issues: keep it short. */
function firstLine(msg: string | undefined): string {
  if (!msg) return "input does not match the schema";
  try {
    const issues = JSON.parse(msg) as Array<{ path?: unknown[]; message?: string }>;
    const i = Array.isArray(issues) ? issues[0] : undefined;
    if (i?.message) {
      const path = Array.isArray(i.path) && i.path.length ? `input.${i.path.join(".")}` : "input";
      return `${path}: ${i.message}`;
    }
  } catch {
    // not JSON: use it as it is
  }
  return msg.split("\n")[0]!.slice(0, 500);
}

/** A tool may return a value, a promise, or (AI SDK streaming tools) an async iterable: its last value counts. */
async function lastValue(v: unknown): Promise<unknown> {
  const r = await v;
  if (r !== null && typeof r === "object" && Symbol.asyncIterator in r &&
    typeof (r as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
    let last: unknown;
    for await (const x of r as AsyncIterable<unknown>) last = x;
    return last;
  }
  return r;
}

/** JSON text for a tool's output, or why it has none (BigInt, a cycle, undefined, a throwing toJSON). */
export function toJsonText(v: unknown): { ok: true; text: string } | { ok: false; why: string } {
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    const m = e instanceof Error ? e.message : "";
    if (/BigInt/i.test(m)) return { ok: false, why: "it holds a BigInt" };
    if (/circular/i.test(m)) return { ok: false, why: "it holds a cycle" };
    return { ok: false, why: "it cannot be serialized" };
  }
  if (text === undefined) return { ok: false, why: `it is ${v === undefined ? "undefined" : typeof v}` };
  return { ok: true, text };
}
