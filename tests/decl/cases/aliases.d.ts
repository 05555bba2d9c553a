/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Claims the alias a_b first. */
  "a-b": (input: {}) => Promise<number>;
  /** The same tool as "a-b". */
  a_b: (input: {}) => Promise<number>;
  /** Maps to a_b too: no alias. */
  "a.b": (input: {}) => Promise<string>;
  /** The disabled off-tool claimed off_tool: no alias. */
  "off.tool": (input: {}) => Promise<unknown>;
  /** A tool is named x_y itself: it wins. */
  "x-y": (input: {}) => Promise<boolean>;
  x_y: (input: {}) => Promise<null>;
  /** Its alias 1_x is not an identifier. */
  "1-x": (input: unknown) => Promise<unknown>;
  /** Its alias is a reserved name. */
  "__proto-_": (input: unknown) => Promise<unknown>;
  /** Non-ASCII: one _ per UTF-16 unit. */
  "hé-😀": (input: {}) => Promise<string>;
  /** The same tool as "hé-😀". */
  h____: (input: {}) => Promise<string>;
};
