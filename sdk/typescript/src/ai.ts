// @codepod/client/ai: the `code` tool for the Vercel AI SDK (ai 6 and 7).
import { randomUUID } from "node:crypto";
import * as aiModule from "ai";
import { jsonSchema, tool, type Tool } from "ai";
import type { Codepod } from "./client.js";
import { checkPolicy } from "./policy.js";
import { listWorkspace } from "./sandbox.js";
import { CODE_INPUT_SCHEMA, codeDescription, outputForModel, type CodeInput, type CodeOutput } from "./model.js";
import type { Outcome, Policy, ToModelError, Tools } from "./types.js";

export { codeDescription, outputForModel, CODE_INPUT_SCHEMA };
export type { CodeInput, CodeOutput };

/** One piece of a program's live output. */
export interface CodeLog {
  executionId: string;
  /** The AI SDK's toolCallId of the `code` call that runs the program. */
  toolCallId?: string;
  stream: "stdout" | "stderr";
  text: string;
}

export interface CodeModeToolOptions {
  codepod: Codepod;
  /** The conversation (scope key) whose sandbox runs the programs. */
  conversation: string;
  /** The tools a program may call: AI SDK tool() objects or plain tools. */
  tools: Tools;
  /** The limits of every program (checked here: a key codepod does not know throws). */
  policy?: Policy;
  /** The former name of `policy`, still taken. */
  executionPolicy?: Policy;
  /**
   * Live output of each program, with the ids that route it to the right
   * place in a UI: the execution, and the AI SDK's id of the `code` call.
   * (A function of two parameters, the older form, gets `(stream, text)`.)
   */
  onLog?: (log: CodeLog) => void;
  /** What a program sees of an error a tool threw (default: its message). */
  toModelError?: ToModelError;
  /**
   * A program stopped at calls that need approval (tools with
   * `needsApproval`): keep the outcome's `continuation` and the input, ask the
   * person, then `codepod.resume({ conversation, js: input.js, tools,
   * continuation, decisions })`. The model reads the pending calls.
   */
  onSuspended?: (outcome: Outcome, input: CodeInput) => void;
  /**
   * Tells the model which files the workspace holds (paths relative to it):
   * a list, or true to list the workspace now (files only, at most
   * MAX_LISTED_FILES of them, breadth first).
   */
  workspaceFiles?: readonly string[] | boolean;
}

/**
 * An AI SDK tool that runs the model's program in codepod. Asynchronous: its
 * description holds the declarations codepod renders for `tools`, asked for
 * once here.
 *
 * With ai 7 it is also a tool caller (`experimental_toolCaller`, type
 * `local`): give generateText `experimental_toolCallers: { lookup: ["code"] }`
 * and `lookup` is callable only from programs, never by the model directly;
 * the AI SDK binds the routed tools (as it prepared them) to the code tool,
 * and a program's calls run those. A routed tool must also be among
 * `tools`, which the description declares.
 */
/** The code tool; with ai 7, a tool caller too (the shape of ai 7's Experimental_ToolCallerTool). */
export type CodeModeTool = Tool<CodeInput, CodeOutput> & {
  readonly experimental_toolCaller: { type: "local"; bind: (tools: any) => Tool<any, any> };
};

export async function codeModeTool(opts: CodeModeToolOptions): Promise<CodeModeTool> {
  if (opts.policy && opts.executionPolicy) {
    throw new TypeError("codeModeTool(): give policy or executionPolicy (its former name), not both");
  }
  const policy = opts.policy ?? opts.executionPolicy;
  checkPolicy(policy, "codeModeTool()");
  const declarations = await opts.codepod.declarations(opts.tools);
  const approvals = Object.values(opts.tools).some((t) => {
    const na = (t as { needsApproval?: unknown }).needsApproval;
    return na !== undefined && na !== false;
  });
  const files = opts.workspaceFiles === true
    ? await listWorkspace(opts.codepod.sandbox(opts.conversation))
    : Array.isArray(opts.workspaceFiles) ? opts.workspaceFiles : [];
  const base = codeTool(opts, policy, codeDescription(declarations, policy, approvals, files), opts.tools);
  // ai 6 has no tool callers: there the code tool is only a tool.
  const toolCaller = (aiModule as Record<string, unknown>).experimental_toolCaller;
  if (typeof toolCaller !== "function") return base as CodeModeTool;
  return (toolCaller as (t: Tool, d: object) => CodeModeTool)(base, {
    type: "local",
    bind: (bound: Tools) => {
      for (const name of Object.keys(bound)) {
        if (!Object.hasOwn(opts.tools, name)) {
          throw new TypeError(`codeModeTool(): experimental_toolCallers routes ${name} to this code tool, ` +
            "but it is not among its tools, so the model's declarations do not have it");
        }
      }
      return codeTool(opts, policy, base.description as string, { ...opts.tools, ...bound });
    },
  });
}

/** The code tool itself, running programs with `tools`. */
function codeTool(opts: CodeModeToolOptions, policy: Policy | undefined, description: string,
  tools: Tools): Tool<CodeInput, CodeOutput> {
  return tool({
    description,
    inputSchema: jsonSchema<CodeInput>(CODE_INPUT_SCHEMA as unknown as Parameters<typeof jsonSchema>[0]),
    execute: async (input: CodeInput, options: { abortSignal?: AbortSignal; toolCallId?: string }): Promise<CodeOutput> => {
      const id = randomUUID();
      const onLog = opts.onLog;
      const toolCallId = options.toolCallId;
      const log = !onLog ? undefined : onLog.length >= 2
        ? (onLog as unknown as (stream: "stdout" | "stderr", text: string) => void)
        : (stream: "stdout" | "stderr", text: string) =>
          onLog({ executionId: id, ...(toolCallId !== undefined ? { toolCallId } : {}), stream, text });
      const outcome = await opts.codepod.run({
        id,
        conversation: opts.conversation,
        js: input.js,
        reason: input.reason,
        tools,
        ...(policy ? { policy } : {}),
        ...(options.abortSignal ? { signal: options.abortSignal } : {}),
        ...(log ? { onLog: log } : {}),
        ...(opts.toModelError ? { toModelError: opts.toModelError } : {}),
      });
      if (outcome.status === "suspended") opts.onSuspended?.(outcome, input);
      return outputForModel(outcome);
    },
  });
}
