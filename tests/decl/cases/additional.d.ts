/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** additionalProperties as index signatures. */
  setLabels: (input: { labels: { [key: string]: string; }; counts?: { [key: string]: number; }; meta?: { [key: string]: unknown; }; open?: { id: string; [key: string]: unknown; }; mixed?: { id: string; [key: string]: number | string; }; closed?: {}; optionalMixed?: { a?: string; [key: string]: number | string | undefined; }; deep?: { [key: string]: { [key: string]: string | null; }; }; listOfMaps?: { k: string; [key: string]: boolean | string; }[]; }) => Promise<{ [key: string]: string[]; }>;
};
