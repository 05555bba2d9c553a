/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** anyOf and oneOf as unions, allOf as intersections. */
  search: (input: { query: string | string[]; target?: { kind: "user"; id: string; } | { kind: "team"; slug: string; }; paging?: { /** @integer */ limit?: number; } & { cursor?: string; }; mixed?: { a?: string; } & ({ b: number; } | { c: boolean; }); requiredOnly?: { x?: string; y?: string; }; orUnknown?: unknown; dups?: string | number; unionOfUnions?: (string | number) & (string | boolean); }) => Promise<{ /** @integer */ hits: number; } | null>;
};
