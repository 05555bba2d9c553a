const [invoices, firms] = await Promise.all([
  tools.listInvoices({ month: "2026-08" }),
  tools.listFirms({}),
]);
const names = new Map(firms.map((firm) => [firm.id, firm.name]));
const totals = new Map();
for (const invoice of invoices) {
  if (invoice.status !== "paid") continue;
  totals.set(
    invoice.firmId,
    (totals.get(invoice.firmId) ?? 0) + invoice.amountCents,
  );
}
return [...totals]
  .map(([firmId, cents]) => ({ firm: names.get(firmId), cents }))
  .sort((a, b) => b.cents - a.cents)
  .slice(0, 3);
