// @ts-expect-error: no tools
await tools.anything({});
