// @codepod/client: run model-written programs in codepod with your tools.
export { Codepod } from "./client.js";
export type { ConnectOptions, RunOptions, RunningExecution, Trace } from "./client.js";
export { CodepodConnectError } from "./transport.js";
export type { Logger, SpawnOptions } from "./transport.js";
export { codeDescription, outputForModel, CODE_INPUT_SCHEMA } from "./model.js";
export { POLICY_KEYS } from "./policy.js";
export type { CodeInput, CodeOutput } from "./model.js";
export { ApprovalMemory } from "./approvals.js";
export type * from "./types.js";
