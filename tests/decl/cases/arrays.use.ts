const grid = await tools.matrix({
  rows: [[1, 2], [3]],
  people: [{ name: "Ada", pets: [{ species: "cat" }] }],
  ids: ["a", 1],
  nested: [["x", null]],
  point: [1, 2],
  head: ["h", 1, 2, 3],
  legacy: ["s", 1],
  open: ["s", 1, true],
  implied: [true],
});
const first: boolean = grid[0][0].ok;
void first;
