/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** A category tree. */
  getTree: (input: { root?: string; }) => Promise<{ name: string; children: unknown[]; }>;
  selfRoot: (input: { value: number; next?: unknown; }) => Promise<{ b?: { a?: unknown; loop?: unknown; }; }>;
};
