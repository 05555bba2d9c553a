/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Book a room. */
  book: (input: { /** Who books. @format email */ email: string; /** @format date @pattern ^\d{4}-\d{2}-\d{2}$ @example "2026-12-01" @example "2027-01-31" @example "2027-02-28" */ day: string; /** @integer @default 1 @example 1 @example 7 */ nights?: number; /** Room kind. @default "single" */ room?: "single" | "double"; /** @default {"breakfast":true,"note":"a *\/ b"} */ options?: { [key: string]: unknown; }; /** @pattern ^[A-Z]*\/x$ */ code?: string; /** @default "ééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé... */ long?: string; plain?: string; }) => Promise<{ /** @format uuid */ ref: string; }>;
};
