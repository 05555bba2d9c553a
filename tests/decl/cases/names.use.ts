const s: string = await tools["my-tool"]({ "first-name": "Ada", class: "x", "2fast": true });
const n: number = await tools["get.value"]({});
const b: boolean = await tools.ok_name({});
void s; void n; void b;
const s2: string = await tools.my_tool({ "first-name": "Ada", class: "x" });
const n2: number = await tools.get_value({});
void s2; void n2;
