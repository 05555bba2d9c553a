const doc: unknown = await tools.fetchDoc({ remote: 1, local: "id" });
void doc;
