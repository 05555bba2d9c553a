// The backend's own tools, as ordinary Vercel AI SDK tools with zod schemas.
// Here they read the example data of tests/example; in a real backend they
// would query its database. Nothing in this file is about codepod.
import { readFileSync } from "node:fs";
import { tool } from "ai";
import { z } from "zod";

const data = process.env.CODEPOD_EXAMPLE_DATA
  ? new URL(`file://${process.env.CODEPOD_EXAMPLE_DATA.replace(/\/?$/, "/")}`)
  : new URL("../../../tests/example/data/", import.meta.url);
const invoices = JSON.parse(readFileSync(new URL("invoices.json", data), "utf8")) as
  Array<{ firmId: string; month: string; amountCents: number; status: "paid" | "void" }>;
const firms = JSON.parse(readFileSync(new URL("firms.json", data), "utf8")) as Array<{ id: string; name: string }>;

export const listInvoices = tool({
  description: "List invoices for a month (YYYY-MM). Amounts are integer cents.",
  inputSchema: z.object({ month: z.string().regex(/^\d{4}-\d{2}$/) }),
  outputSchema: z.array(z.object({
    firmId: z.string(), amountCents: z.number().int(), status: z.enum(["paid", "void"]),
  })),
  execute: async ({ month }) => invoices.filter((i) => i.month === month)
    .map(({ firmId, amountCents, status }) => ({ firmId, amountCents, status })),
});

export const listFirms = tool({
  description: "List the workspace's firms.",
  inputSchema: z.object({}),
  outputSchema: z.array(z.object({ id: z.string(), name: z.string() })),
  execute: async () => firms,
});
