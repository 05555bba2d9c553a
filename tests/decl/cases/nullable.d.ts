/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Type arrays and OpenAPI nullable. */
  updateUser: (input: { nickname: string | null; /** @integer */ age?: number | null; address?: { city: string; } | null; tags?: string[] | null; role?: "admin" | "member" | null; twice?: string | null; many?: string | number | boolean | null; empty?: unknown; weird?: unknown; }) => Promise<{ id: string; } | null>;
};
