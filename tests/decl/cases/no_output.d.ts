/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** No outputSchema: the result is unknown. */
  noOutput: (input: { id: string; }) => Promise<unknown>;
  /** Neither schema. */
  noSchemas: (input: unknown) => Promise<unknown>;
  emptySchemas: (input: unknown) => Promise<unknown>;
  booleanSchemas: (input: unknown) => Promise<never>;
  anyProps: (input: { x?: unknown; y?: unknown; z?: never; }) => Promise<null>;
};
