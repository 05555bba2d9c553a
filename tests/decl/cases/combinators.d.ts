declare const tools: {
  /** anyOf and oneOf as unions, allOf as intersections. */
  search: (input: { query: string | string[]; target?: { kind: "user"; id: string; } | { kind: "team"; slug: string; }; paging?: { limit?: number; } & { cursor?: string; }; mixed?: { a?: string; } & ({ b: number; } | { c: boolean; }); requiredOnly?: { x?: string; y?: string; }; orUnknown?: unknown; dups?: string | number; unionOfUnions?: (string | number) & (string | boolean); }) => Promise<{ hits: number; } | null>;
};
