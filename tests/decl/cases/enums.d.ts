/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Enums and consts as literal unions. */
  setMode: (input: { mode: "fast" | "slow" | "say \"hi\"" | "back\\slash" | "new\nline" | "café"; level?: 1 | 2 | 3.5 | -4; flag?: true | false | null; mixed?: "a" | 1 | null; kind?: "fixed"; version?: 2; shape?: unknown; objectChoice?: unknown; nothing?: never; signs?: (-1 | 1)[]; negative?: (-1)[]; dup?: "x"; }) => Promise<"ok" | "error">;
};
