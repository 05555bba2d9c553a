const m = await tools.setLabels({
  labels: { env: "prod" },
  mixed: { id: "x", extra: 1 },
  optionalMixed: { b: 2 },
  open: { id: "y", whatever: [1] },
  deep: { a: { b: null } },
  listOfMaps: [{ k: "k", on: true }],
});
const list: string[] | undefined = m["anything"];
void list;
