// @codepod/client: run model-written programs in codepod with your tools.
export { Codepod } from "./client.js";
export type { ConnectOptions, RunOptions, RunningExecution, Trace } from "./client.js";
export { CodepodConnectError } from "./transport.js";
export type { Logger, SpawnOptions } from "./transport.js";
export { codeDescription, outputForModel, CODE_INPUT_SCHEMA, MAX_NAMED_FILES } from "./model.js";
export { POLICY_KEYS } from "./policy.js";
export type { CodeInput, CodeOutput } from "./model.js";
export { ApprovalMemory } from "./approvals.js";
export type * from "./types.js";
export { CodepodError } from "./ops.js";
export { CodepodSandbox, listWorkspace, MAX_LISTED_FILES, WORKSPACE, workspacePath } from "./sandbox.js";
export type {
  SandboxOptions, SandboxFileStat, SandboxProcess, WritableSandboxProcess, SandboxProcessOptions, SandboxSpawnOptions,
  SandboxReadTextFileOptions, SandboxPathOptions, SandboxWriteOptions, BashToolCommandResult,
} from "./sandbox.js";
export { CHUNK_BYTES } from "./files.js";
export type { ConversationFiles, DirectoryEntry, DirectoryPage, FileMeta, FileStat, OpenedRead, ReadRange, WriteSource } from "./files.js";
export type { Command, CommandOptions, CommandResult } from "./commands.js";
export { MAX_UNREAD_BYTES } from "./commands.js";
export { webhookHandler, webhookSignature } from "./webhook.js";
export type { WebhookAnswer, WebhookHandler, WebhookOptions } from "./webhook.js";
export { mcpTools } from "./mcp.js";
export type { McpClientLike } from "./mcp.js";
