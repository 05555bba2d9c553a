declare const tools: {
  /** Enabled by default. */
  visible: (input: {}) => Promise<string>;
  alsoVisible: (input: { n: number; }) => Promise<number>;
};
