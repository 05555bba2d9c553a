declare const tools: {
  /** List invoices for a month (YYYY-MM). Amounts are integer cents. */
  listInvoices: (input: { /** @pattern ^\d{4}-\d{2}$ */ month: string; }) => Promise<{ firmId: string; amountCents: number; status: "paid" | "void"; }[]>;
  /** List the workspace's firms. */
  listFirms: (input: {}) => Promise<{ id: string; name: string; }[]>;
};
