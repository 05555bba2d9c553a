const res = await tools.search({
  query: ["a", "b"],
  target: { kind: "team", slug: "core" },
  paging: { limit: 10, cursor: "c" },
  mixed: { a: "x", b: 1 },
  unionOfUnions: "s",
});
const hits: number | undefined = res?.hits;
void hits;
