/*
 * Some tools need a person's approval. A program that calls one stops there;
 * once a person approved (or refused) the call, the program is run again from
 * the start: the calls it made before are answered as the first time, and the
 * approved call then runs (a refused one throws an Error with the reason).
 * So before a call that needs approval, make the same calls in the same order
 * on every run: do not branch on the time, on randomness or on anything else
 * that can change between runs. What the program wrote to the workspace before
 * that call is written again: make such writes idempotent (the same content,
 * at the same path).
 */
/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Open invoices. */
  listInvoices: (input: {}) => Promise<{ id: string; /** @integer */ amountCents: number; }[]>;
  /**
   * Pay one invoice.
   *
   * Needs a person's approval before it runs: see the note above `tools`.
   */
  payInvoice: (input: { id: string; }) => Promise<{ ref: string; }>;
  /** Needs a person's approval before it runs: see the note above `tools`. */
  deleteAll: (input: unknown) => Promise<unknown>;
};
