const r: { total: number } = await tools.search({ query: "lamp", limit: 20, price: 19.99, tags: ["a"], page: 0 });
// @ts-expect-error: the query is required
await tools.search({ limit: 5 });
// @ts-expect-error: a limit is a number
await tools.search({ query: "lamp", limit: "5" });
void r;
