const s: string = await tools["my-tool"]({ "first-name": "Ada", class: "x", "2fast": true });
const n: number = await tools["get.value"]({});
const b: boolean = await tools.ok_name({});
void s; void n; void b;
