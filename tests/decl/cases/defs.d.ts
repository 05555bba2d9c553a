/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Create an order. */
  createOrder: (input: { /** Who buys. */ customer: { id: string; /** A postal address. */ address?: { street: string; city: string; }; }; /** Where to ship; the billing address when left out. */ shipTo?: { street: string; city: string; }; billTo?: { street: string; city: string; }; lines: { sku: string; /** @integer */ qty: number; }[]; tag?: "slash"; code?: "tilde"; pct?: number; second?: boolean; }) => Promise<{ orderId: string; total: number; }>;
};
