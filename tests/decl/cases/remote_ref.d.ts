declare const tools: {
  /** Remote and unresolvable references render as unknown. */
  fetchDoc: (input: { remote: unknown; relative?: unknown; missing?: unknown; anchor?: unknown; /** A document id. */ local: string; list?: unknown[]; notString?: unknown; }) => Promise<unknown>;
};
