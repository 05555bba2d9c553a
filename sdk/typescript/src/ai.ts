// @codepod/client/ai: the `code` tool for the Vercel AI SDK (ai 6 and 7).
import { jsonSchema, tool, type Tool } from "ai";
import type { Codepod } from "./client.js";
import { CODE_INPUT_SCHEMA, codeDescription, outputForModel, type CodeInput, type CodeOutput } from "./model.js";
import type { Policy, ToModelError, Tools } from "./types.js";

export { codeDescription, outputForModel, CODE_INPUT_SCHEMA };
export type { CodeInput, CodeOutput };

export interface CodeModeToolOptions {
  codepod: Codepod;
  /** The conversation (scope key) whose sandbox runs the programs. */
  conversation: string;
  /** The tools a program may call: AI SDK tool() objects or plain tools. */
  tools: Tools;
  executionPolicy?: Policy;
  /** Live output of each program. */
  onLog?: (stream: "stdout" | "stderr", text: string) => void;
  /** What a program sees of an error a tool threw (default: its message). */
  toModelError?: ToModelError;
}

/**
 * An AI SDK tool that runs the model's program in codepod. Asynchronous: its
 * description holds the declarations codepod renders for `tools`, asked for
 * once here.
 */
export async function codeModeTool(opts: CodeModeToolOptions): Promise<Tool<CodeInput, CodeOutput>> {
  const declarations = await opts.codepod.declarations(opts.tools);
  return tool({
    description: codeDescription(declarations, opts.executionPolicy),
    inputSchema: jsonSchema<CodeInput>(CODE_INPUT_SCHEMA as unknown as Parameters<typeof jsonSchema>[0]),
    execute: async (input: CodeInput, options: { abortSignal?: AbortSignal }): Promise<CodeOutput> => {
      const outcome = await opts.codepod.run({
        conversation: opts.conversation,
        js: input.js,
        reason: input.reason,
        tools: opts.tools,
        ...(opts.executionPolicy ? { policy: opts.executionPolicy } : {}),
        ...(options.abortSignal ? { signal: options.abortSignal } : {}),
        ...(opts.onLog ? { onLog: opts.onLog } : {}),
        ...(opts.toModelError ? { toModelError: opts.toModelError } : {}),
      });
      return outputForModel(outcome);
    },
  });
}
