const r: unknown = await tools.noOutput({ id: "x" });
await tools.noSchemas(1);
await tools.emptySchemas("anything");
const z: null = await tools.anyProps({ x: 1, y: "y" });
void r; void z;
