const u = await tools.updateUser({ nickname: null, age: null, address: null, tags: ["a"], role: null, many: false });
const id: string | undefined = u?.id;
void id;
