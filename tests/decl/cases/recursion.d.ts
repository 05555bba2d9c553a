declare const tools: {
  /** A category tree. */
  getTree: (input: { root?: string; }) => Promise<{ name: string; children: unknown[]; }>;
  selfRoot: (input: { value: number; next?: unknown; }) => Promise<{ b?: { a?: unknown; loop?: unknown; }; }>;
};
