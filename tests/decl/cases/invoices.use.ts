const [invoices, firms] = await Promise.all([
  tools.listInvoices({ month: "2026-08" }),
  tools.listFirms({}),
]);
const names = new Map(firms.map((firm) => [firm.id, firm.name]));
let total: number = 0;
for (const invoice of invoices) {
  if (invoice.status !== "paid") continue;
  total += invoice.amountCents;
  const firm: string | undefined = names.get(invoice.firmId);
  void firm;
}
// @ts-expect-error: the month is required
await tools.listInvoices({});
// @ts-expect-error: "open" is not a status
const bad: (typeof invoices)[number]["status"] = "open";
void bad;
void total;
