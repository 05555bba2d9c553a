/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Arrays of arrays, of objects and of unions; tuples. */
  matrix: (input: { rows: number[][]; people?: { name: string; pets: { species: string; /** @integer */ legs?: number; }[]; }[]; ids?: (string | number)[]; nested?: (string | null)[][]; anything?: unknown[]; point?: [number, number]; head?: [string, ...number[]]; legacy?: [string, number]; open?: [string, ...unknown[]]; implied?: boolean[]; }) => Promise<{ ok: boolean; }[][]>;
};
