const r: { ref: string } = await tools.book({ email: "a@b.c", day: "2026-12-01", nights: 2, room: "double" });
// @ts-expect-error: the room is one of the enum's values
await tools.book({ email: "a@b.c", day: "2026-12-01", room: "suite" });
void r;
