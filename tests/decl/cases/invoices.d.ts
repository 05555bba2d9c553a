/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** List invoices for a month (YYYY-MM). Amounts are integer cents. */
  listInvoices: (input: { /** @pattern ^\d{4}-\d{2}$ */ month: string; }) => Promise<{ firmId: string; /** @integer */ amountCents: number; status: "paid" | "void"; }[]>;
  /** List the workspace's firms. */
  listFirms: (input: {}) => Promise<{ id: string; name: string; }[]>;
};
