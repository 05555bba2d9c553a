/**
 * The tools a program calls as `await tools.name(input)`. Programs of one
 * conversation may run at the same time, and then share its workspace
 * (the working directory): give files each program writes names of their
 * own. Programs have no network access: fetch and sockets fail.
 * require() gives Node's built-in modules only.
 */
declare const tools: {
  /** Search the catalogue. */
  search: (input: { /** What to look for. @minLength 1 @maxLength 200 */ query: string; /** @integer @minimum 1 @maximum 50 @default 10 */ limit?: number; /** @exclusiveMinimum 0 @exclusiveMaximum 1000.5 @multipleOf 0.01 */ price?: number; /** @minItems 1 @maxItems 5 @uniqueItems */ tags?: string[]; /** @minProperties 1 @maxProperties 3 */ filters?: { [key: string]: string; }; /** Zero-based. @integer @minimum 0 */ page?: number; /** @integer @minimum 0 */ maybe?: number | null; either?: number; /** @minimum 0 */ legacy?: number; notUnique?: unknown[]; }) => Promise<{ /** @integer @minimum 0 */ total: number; }>;
};
