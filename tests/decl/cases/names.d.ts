/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** A tool whose name is not an identifier. */
  "my-tool": (input: { "first-name": string; "2fast"?: boolean; "with space"?: string; "quote\"d\\"?: string; "héllo"?: string; ""?: string; $ok?: number; _ok9?: number; class: string; default?: string; }) => Promise<string>;
  /** The same tool as "my-tool". */
  my_tool: (input: { "first-name": string; "2fast"?: boolean; "with space"?: string; "quote\"d\\"?: string; "héllo"?: string; ""?: string; $ok?: number; _ok9?: number; class: string; default?: string; }) => Promise<string>;
  "get.value": (input: {}) => Promise<number>;
  /** The same tool as "get.value". */
  get_value: (input: {}) => Promise<number>;
  ok_name: (input: {}) => Promise<boolean>;
};
