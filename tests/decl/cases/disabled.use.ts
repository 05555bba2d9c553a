const v: string = await tools.visible({});
const n: number = await tools.alsoVisible({ n: 1 });
// @ts-expect-error: a disabled tool is not declared
await tools.hidden({});
void v; void n;
