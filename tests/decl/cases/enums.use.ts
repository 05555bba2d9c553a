const r = await tools.setMode({ mode: "say \"hi\"", level: -4, flag: null, kind: "fixed", version: 2, signs: [-1, 1], negative: [-1], dup: "x" });
const ok: "ok" | "error" = r;
void ok;
// @ts-expect-error: not one of the modes
await tools.setMode({ mode: "medium" });
