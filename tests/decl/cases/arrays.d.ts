declare const tools: {
  /** Arrays of arrays, of objects and of unions; tuples. */
  matrix: (input: { rows: number[][]; people?: { name: string; pets: { species: string; legs?: number; }[]; }[]; ids?: (string | number)[]; nested?: (string | null)[][]; anything?: unknown[]; point?: [number, number]; head?: [string, ...number[]]; legacy?: [string, number]; open?: [string, ...unknown[]]; implied?: boolean[]; }) => Promise<{ ok: boolean; }[][]>;
};
