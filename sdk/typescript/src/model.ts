// What a model reads about the `code` tool: the script rules (docs/contract.md
// §2, with this execution policy's limits) followed by the declarations codepod
// renders, its input schema, and the outcome turned into its output. The
// Python package (sdk/python/codepod/model.py) says the same words.
import type { Outcome, Policy } from "./types.js";

export const CODE_INPUT_SCHEMA = {
  type: "object",
  properties: {
    reason: { type: "string", description: "A short label for the user saying what this program does, e.g. \"Totalling August invoices\"." },
    js: { type: "string", description: "The whole program: the body of an async function (JavaScript or TypeScript)." },
  },
  required: ["reason", "js"],
  additionalProperties: false,
} as const;

export interface CodeInput {
  reason: string;
  js: string;
}

const APPROVAL_MARK = "Some tools need a person's approval.";
const APPROVAL_RULE = `- ${APPROVAL_MARK} A program that calls one may stop there; once a person ` +
  "answered, it is run again from the start, its earlier calls answered as the first time. So before such a call, " +
  "make the same calls in the same order on every run (no branching on the time or on randomness), and make " +
  "workspace writes before it idempotent: they happen again.";

const DEFAULTS = { timeoutMs: 30_000, maxResultBytes: 32_768, maxBridgeRequests: 256 };

function bytes(n: number): string {
  return n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
}

/** How many of the workspace's files the description names before it counts the rest. */
export const MAX_NAMED_FILES = 50;

/** The line that tells the model which files the workspace holds (none: no line). */
export function filesLine(files: readonly string[]): string[] {
  if (!files.length) return [];
  const named = files.slice(0, MAX_NAMED_FILES).map((f) => `\`${f}\``).join(", ");
  const more = files.length > MAX_NAMED_FILES ? `, and ${files.length - MAX_NAMED_FILES} more` : "";
  return [`- The workspace already holds these files (paths relative to it): ${named}${more}.`];
}

/** The rules a model must know to write a program, with the policy's limits (and the workspace's files, when given), then the declarations. */
export function codeDescription(declarations: string, policy: Policy = {}, approvals = false,
                                files: readonly string[] = []): string {
  const timeout = policy.timeoutMs ?? DEFAULTS.timeoutMs;
  const budget = policy.maxResultBytes ?? DEFAULTS.maxResultBytes;
  const calls = policy.maxBridgeRequests ?? DEFAULTS.maxBridgeRequests;
  return [
    "Run a JavaScript or TypeScript program in a fresh Node.js 22 process in this conversation's sandbox. " +
      "Use it to combine several tool calls, compute over their results, or work with files; only what the program returns and prints comes back.",
    "",
    "- `js` is the body of an async function: top-level `await` and `return` work. TypeScript annotations are stripped without type checking; syntax that needs transformation, such as `enum`, fails.",
    "- Call the tools declared below as `await tools.name(input)`; each takes and returns JSON. A call that fails throws an Error whose message says why; you can catch it.",
    "- Use `require(...)` or `await import(...)` for the modules the declarations below name (Node built-ins, and the packages this deployment has); static `import` declarations are not allowed.",
    "- Programs have no network access: `fetch` and sockets fail. Reach outside only through the tools.",
    "- The working directory is the conversation's workspace: files written there persist across calls, JavaScript variables do not.",
    "- Several `code` calls of this conversation may run at the same time (several in one turn) and then share the workspace: give files each program writes names of their own.",
    ...filesLine(files),
    `- \`return\` a small JSON value; it comes back as \`result\` (a Map or Set becomes {}). Output of console.* and process.stdout/stderr comes back as \`logs\` (the last ${bytes(budget)}).`,
    `- Limits: ${timeout / 1000} s per program, waiting on tools included; ${calls} tool calls; a result over ${bytes(budget)} fails the program, so return a summary or save the full output to a workspace file.`,
    "- `reason` is a short label shown to the user.",
    // codepod's declarations say it above `tools` for a tool that always needs approval.
    ...(approvals && !declarations.includes(APPROVAL_MARK) ? [APPROVAL_RULE] : []),
    "",
    declarations.trimEnd(),
  ].join("\n");
}

/** The outcome as the model should read it: result and logs, or the code, the safe message and the program's own error. */
export type CodeOutput =
  | { status: "succeeded"; result?: unknown; logs: string; logsTruncated?: true }
  | { status: "suspended"; message: string; pending: { call: string; tool: string; input: unknown }[]; logs: string }
  | {
    status: "failed";
    error: { code: string; message: string; programError?: { name: string; message: string; stack: string } };
    logs: string;
    logsTruncated?: true;
  };

export function outputForModel(o: Outcome): CodeOutput {
  const trunc = o.logsTruncated ? { logsTruncated: true as const } : {};
  if (o.status === "suspended") {
    const pending = o.pending ?? [];
    return {
      status: "suspended", pending, logs: o.logs,
      message: `The program stopped at ${pending.length === 1 ? "a call" : `${pending.length} calls`} that ` +
        "need a person's approval; once they answer, it is run again from the start.",
    };
  }
  if (o.status === "succeeded") {
    const out: CodeOutput = { status: "succeeded", logs: o.logs, ...trunc };
    if ("result" in o) out.result = o.result;
    return out;
  }
  const error: Extract<CodeOutput, { status: "failed" }>["error"] = {
    code: String(o.error?.code ?? "INTERNAL"),
    message: String(o.error?.message ?? "the program failed"),
  };
  if (o.error?.programError) error.programError = o.error.programError;
  return { status: "failed", error, logs: o.logs, ...trunc };
}
