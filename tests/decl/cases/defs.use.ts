const order = await tools.createOrder({
  customer: { id: "c1", address: { street: "Main St 1", city: "Bern" } },
  lines: [{ sku: "A-1", qty: 2 }],
  tag: "slash",
  code: "tilde",
  pct: 12.5,
  second: true,
});
const id: string = order.orderId;
void id;
