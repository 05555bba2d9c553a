const n: number = await tools.a_b({});
const n2: number = await tools["a-b"]({});
const s: string = await tools["a.b"]({});
const b: boolean = await tools["x-y"]({});
const z: null = await tools.x_y({});
const e: string = await tools.h____({});
// @ts-expect-error: off.tool has no alias (the disabled off-tool has it)
await tools.off_tool({});
void n; void n2; void s; void b; void z; void e;
