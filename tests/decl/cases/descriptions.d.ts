/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /**
   * Send an email. *\/ declare const evil: 1; /*
   * Second line, with trailing spaces.
   *
   * Indented line after a blank one.
   */
  sendMail: (input: { /** Recipient address; ends the comment here: *\/ not really. */ to: string; /** Line one. Line two. Tabbed. */ subject: string; body?: string; /** Copies (an item's description is dropped). */ cc?: string[]; /** **\/ and *\// and / * / and ends with * */ stars?: string; nondesc?: string; }) => Promise<{ /** The queue id. */ messageId: string; }>;
  /** *\/*\/*\/ */
  multiStar: (input: {}) => Promise<unknown>;
  blankDescription: (input: {}) => Promise<unknown>;
};
