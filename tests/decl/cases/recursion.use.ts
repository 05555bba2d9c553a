const tree = await tools.getTree({});
const kids: unknown[] = tree.children;
void kids;
await tools.selfRoot({ value: 1, next: { anything: true } });
