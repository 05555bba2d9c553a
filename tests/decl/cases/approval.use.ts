const invoices = await tools.listInvoices({});
const first = invoices[0];
if (first) {
  try {
    const paid: { ref: string } = await tools.payInvoice({ id: first.id });
    void paid;
  } catch (e) {
    void e; // refused: the Error carries the person's reason
  }
}
// @ts-expect-error: the id is required
await tools.payInvoice({});
