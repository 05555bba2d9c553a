declare const tools: {
  /** No outputSchema: the result is unknown. */
  noOutput: (input: { id: string; }) => Promise<unknown>;
  /** Neither schema. */
  noSchemas: (input: unknown) => Promise<unknown>;
  emptySchemas: (input: unknown) => Promise<unknown>;
  booleanSchemas: (input: unknown) => Promise<never>;
  anyProps: (input: { x?: unknown; y?: unknown; z?: never; }) => Promise<null>;
};
