// One conversation's sandbox as the AI SDK 7 (`Experimental_SandboxSession`)
// and bash-tool (`Sandbox`) want it: files of the workspace and shell
// commands, over the session the Codepod holds. The types here mirror the AI
// SDK's, so `ai` 6 users (whose `ai` has none) get the same methods.
import { startCommand, type Command, type CommandOptions, type CommandResult } from "./commands.js";
import {
  collect, conversationFiles, type ConversationFiles, type DirectoryEntry, type DirectoryPage, type FileMeta,
  type FileStat, type WriteSource,
} from "./files.js";
import { CodepodError, type Channel } from "./ops.js";
import type { Policy } from "./types.js";

/** Where the workspace is inside the sandbox (both backends); the commands' working directory. */
export const WORKSPACE = "/workspace";

export interface SandboxOptions {
  /** Limits for the commands (`timeoutMs`, ...), as for programs. */
  policy?: Policy;
  /** Replaces the description the model reads. */
  description?: string;
}

export interface SandboxPathOptions { path: string; abortSignal?: AbortSignal }
export interface SandboxReadTextFileOptions extends SandboxPathOptions {
  /** A TextDecoder label (default "utf-8"). */
  encoding?: string;
  /** 1-based, inclusive (default 1). */
  startLine?: number;
  /** 1-based, inclusive; past the end reads to the end. */
  endLine?: number;
}
export interface SandboxWriteOptions<C> { path: string; content: C; abortSignal?: AbortSignal }
export interface SandboxProcessOptions {
  command: string;
  workingDirectory?: string;
  env?: Record<string, string>;
  abortSignal?: AbortSignal;
}
export interface SandboxSpawnOptions extends SandboxProcessOptions { stdin?: boolean }

export interface SandboxProcess {
  readonly pid?: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  wait(): Promise<{ exitCode: number }>;
  kill(): Promise<void>;
  /** codepod's whole result (status, signal, usage, the bounded text of both streams). */
  readonly result: Promise<CommandResult>;
}
export interface WritableSandboxProcess extends SandboxProcess {
  readonly stdin: WritableStream<Uint8Array>;
}

/** stat as the AI SDK has it (symlinks followed), with codepod's mode and mtime besides. */
export interface SandboxFileStat {
  type: "file" | "directory" | "other";
  size: number;
  mode: number;
  mtimeMs: number;
}

export interface BashToolCommandResult { stdout: string; stderr: string; exitCode: number }

/**
 * A workspace path of the model's (absolute under /workspace, or relative to
 * it) as the protocol takes it: relative to the workspace, "." for the
 * workspace itself. Rules that need the file system (`..` out of it, symlinks)
 * are codepod's to check; this only refuses what cannot be in the workspace.
 */
export function workspacePath(p: string): string {
  if (typeof p !== "string" || p === "") throw new CodepodError("INVALID_REQUEST", "a path is needed");
  let rel = p;
  if (p.startsWith("/")) {
    const norm = p.replace(/\/+/g, "/").replace(/\/\.(?=\/|$)/g, "");
    if (norm === WORKSPACE || norm === WORKSPACE + "/") return ".";
    if (!norm.startsWith(WORKSPACE + "/")) {
      throw new CodepodError("INVALID_REQUEST", `only paths under ${WORKSPACE} (the workspace) can be reached`);
    }
    rel = norm.slice(WORKSPACE.length + 1);
  }
  rel = rel.replace(/\/+/g, "/").replace(/^(\.\/)+/, "").replace(/\/$/, "");
  return rel === "" ? "." : rel;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;

const notFound = (e: unknown) => e instanceof CodepodError && e.code === "NOT_FOUND";

function defaultDescription(conversation: string): string {
  return [
    `A Linux sandbox of codepod, shared by this conversation (${conversation}): its programs, shell commands and files.`,
    `The workspace is ${WORKSPACE}: the working directory of every command, where relative paths resolve and files persist across calls.`,
    "Commands run through /bin/sh -c as an unprivileged user with no network access, each in a fresh process with a deadline; " +
      "nothing outside the workspace persists.",
  ].join("\n");
}

/**
 * The sandbox of one conversation. Every method speaks the session protocol of
 * the Codepod it came from; paths are the workspace's (absolute under
 * /workspace, or relative to it).
 */
export class CodepodSandbox {
  readonly conversation: string;
  readonly description: string;
  /** The files of the workspace with codepod's own options (ranges, ifMatch, cursors, archives). */
  readonly files: ConversationFiles;
  private readonly ch: Channel;
  private readonly policy: Policy | undefined;

  constructor(ch: Channel, conversation: string, opts: SandboxOptions = {}) {
    this.ch = ch;
    this.conversation = conversation;
    this.policy = opts.policy;
    this.description = opts.description ?? defaultDescription(conversation);
    this.files = conversationFiles(ch, conversation);
    // The AI SDK calls these detached (`const { readFile } = sandbox`) as often as not.
    for (const k of ["readFile", "readBinaryFile", "readTextFile", "writeFile", "writeBinaryFile", "writeTextFile",
      "stat", "listDirectory", "deleteFile", "spawn", "run", "command", "executeCommand", "writeFiles", "workspaceDir"] as const) {
      Object.defineProperty(this, k, { value: (this[k] as (...a: unknown[]) => unknown).bind(this), enumerable: false });
    }
  }

  // ---- reading ---------------------------------------------------------------

  /**
   * AI SDK: `readFile({ path })` is the file as a byte stream, null when it does
   * not exist. bash-tool: `readFile(path)` is its text (UTF-8), and a missing
   * file rejects with NOT_FOUND.
   */
  readFile(options: SandboxPathOptions): Promise<ReadableStream<Uint8Array> | null>;
  readFile(path: string): Promise<string>;
  async readFile(arg: SandboxPathOptions | string): Promise<ReadableStream<Uint8Array> | null | string> {
    if (typeof arg === "string") {
      const r = await this.files.read(workspacePath(arg));
      return new TextDecoder().decode(await collect(r.stream));
    }
    try {
      return (await this.files.read(workspacePath(arg.path), {}, arg.abortSignal)).stream;
    } catch (e) {
      if (notFound(e)) return null;
      throw e;
    }
  }

  async readBinaryFile(options: SandboxPathOptions): Promise<Uint8Array | null> {
    const s = await this.readFile(options);
    return s ? collect(s) : null;
  }

  /**
   * The file decoded; with a line range, the lines from startLine to endLine
   * (1-based, inclusive) with their line ends, so consecutive ranges put
   * together give the file back. Reading stops once endLine is reached.
   */
  async readTextFile(options: SandboxReadTextFileOptions): Promise<string | null> {
    const s = await this.readFile(options);
    if (!s) return null;
    const dec = new TextDecoder(options.encoding ?? "utf-8");
    const start = Math.max(1, Math.floor(options.startLine ?? 1));
    const end = options.endLine === undefined ? Infinity : Math.floor(options.endLine);
    if (start === 1 && end === Infinity) return dec.decode(await collect(s));
    let line = 1;
    let out = "";
    const reader = s.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        const text = done ? dec.decode() : dec.decode(value, { stream: true });
        let at = 0;
        while (at < text.length) {
          const nl = text.indexOf("\n", at);
          const stop = nl === -1 ? text.length : nl + 1;
          if (line >= start && line <= end) out += text.slice(at, stop);
          if (nl !== -1) line++;
          at = stop;
        }
        if (done || line > end) break;
      }
    } finally {
      if (line > end) await reader.cancel();
      reader.releaseLock();
    }
    return out;
  }

  // ---- writing ---------------------------------------------------------------

  /** Replaces the file atomically (parents created) from a byte stream, read only as fast as codepod takes it. */
  async writeFile(options: SandboxWriteOptions<ReadableStream<Uint8Array>>): Promise<void> {
    await this.files.write(workspacePath(options.path), options.content, signalOpt(options.abortSignal));
  }

  async writeBinaryFile(options: SandboxWriteOptions<Uint8Array>): Promise<void> {
    await this.files.write(workspacePath(options.path), options.content, signalOpt(options.abortSignal));
  }

  async writeTextFile(options: SandboxWriteOptions<string> & { encoding?: string }): Promise<void> {
    const enc = (options.encoding ?? "utf-8").toLowerCase().replace("_", "-");
    let bytes: Uint8Array;
    if (enc === "utf-8" || enc === "utf8") bytes = new TextEncoder().encode(options.content);
    else if (Buffer.isEncoding(enc)) bytes = Buffer.from(options.content, enc);
    else throw new CodepodError("INVALID_REQUEST", `cannot encode text as ${options.encoding}`);
    await this.files.write(workspacePath(options.path), bytes, signalOpt(options.abortSignal));
  }

  /** bash-tool: writes each file (text as UTF-8). */
  async writeFiles(files: Array<{ path: string; content: string | Uint8Array }>): Promise<void> {
    for (const f of files) {
      const bytes = typeof f.content === "string" ? new TextEncoder().encode(f.content) : f.content;
      await this.files.write(workspacePath(f.path), bytes);
    }
  }

  /** Writes with codepod's answer (size, etag) and its options (ifMatch: a stale one is PRECONDITION_FAILED). */
  write(path: string, content: WriteSource, opts: { ifMatch?: string; mode?: number; signal?: AbortSignal } = {}): Promise<FileMeta> {
    return this.files.write(workspacePath(path), content, opts);
  }

  // ---- the rest of the file operations ---------------------------------------

  async stat(options: SandboxPathOptions): Promise<SandboxFileStat | null> {
    let st: FileStat;
    try {
      st = await this.files.stat(workspacePath(options.path));
    } catch (e) {
      if (notFound(e)) return null;
      throw e;
    }
    return { type: st.type === "symlink" ? "other" : st.type, size: st.size, mode: st.mode, mtimeMs: st.mtimeMs };
  }

  /** Every entry of the directory (pages followed), sorted by name; null when it does not exist. */
  async listDirectory(options: SandboxPathOptions): Promise<DirectoryEntry[] | null> {
    const path = workspacePath(options.path);
    const all: DirectoryEntry[] = [];
    let cursor: string | undefined;
    try {
      do {
        if (options.abortSignal?.aborted) throw options.abortSignal.reason;
        const page: DirectoryPage = await this.files.list(path, cursor === undefined ? {} : { cursor });
        all.push(...page.entries);
        cursor = page.next;
      } while (cursor !== undefined);
    } catch (e) {
      if (notFound(e)) return null;
      throw e;
    }
    return all;
  }

  /** true when it was deleted, false when it did not exist; a directory needs `recursive`. */
  async deleteFile(options: SandboxPathOptions & { recursive?: boolean }): Promise<boolean> {
    try {
      await this.files.delete(workspacePath(options.path), options.recursive ? { recursive: true } : {});
      return true;
    } catch (e) {
      if (notFound(e)) return false;
      throw e;
    }
  }

  // ---- commands --------------------------------------------------------------

  /** A command with every codepod option (argv, stdin, policy, streaming); resolves once accepted. */
  command(opts: CommandOptions): Promise<Command> {
    const o: CommandOptions = { ...opts };
    if (o.cwd !== undefined) {
      const cwd = workspacePath(o.cwd);
      if (cwd === ".") delete o.cwd;
      else o.cwd = cwd;
    }
    if (o.policy === undefined && this.policy) o.policy = this.policy;
    return startCommand(this.ch, this.conversation, o);
  }

  private processOptions(o: SandboxProcessOptions): CommandOptions {
    const c: CommandOptions = { command: o.command };
    if (o.workingDirectory !== undefined) c.cwd = o.workingDirectory;
    if (o.env !== undefined) c.env = o.env;
    if (o.abortSignal !== undefined) c.signal = o.abortSignal;
    return c;
  }

  /**
   * Runs a shell line to its end: its exit code (non-zero is no error) and its
   * output. A command that did not end by itself (TIMEOUT, CANCELLED) rejects
   * with that code; an aborted signal rejects with its reason.
   */
  async run(options: SandboxProcessOptions): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    const cmd = await this.command(this.processOptions(options));
    const r = await cmd.result;
    if (options.abortSignal?.aborted) throw options.abortSignal.reason;
    if (r.status !== "ok") throw new CodepodError(r.error?.code ?? "INTERNAL", r.error?.message ?? "the command failed");
    return { exitCode: r.exitCode ?? exitCodeOf(r), stdout: r.stdout, stderr: r.stderr };
  }

  /**
   * bash-tool: `run` by another name. bash-tool starts every command with
   * `cd "/workspace"`; where the workspace has another path (a server run with
   * --no-isolation has no mount namespace, so it keeps its host path), that
   * `cd` goes to the workspace's own path instead.
   */
  async executeCommand(command: string): Promise<BashToolCommandResult> {
    const cd = `cd "${WORKSPACE}"`;
    if (command.startsWith(cd + " ") || command === cd) {
      const dir = await this.workspaceDir();
      if (dir !== WORKSPACE) command = `cd ${shellQuote(dir)}` + command.slice(cd.length);
    }
    return this.run({ command });
  }

  private workspaceDirP: Promise<string> | undefined;

  /** Where the workspace is inside the sandbox: /workspace, or its host path without isolation (asked once). */
  workspaceDir(): Promise<string> {
    this.workspaceDirP ??= this.run({ command: "pwd" }).then((r) => r.stdout.trim() || WORKSPACE, (e) => {
      this.workspaceDirP = undefined;
      throw e;
    });
    return this.workspaceDirP;
  }

  /**
   * A long-running command: stdout and stderr stream as they come, stdin is
   * writable with `stdin: true`; wait() gives its exit code (128 + N when a
   * signal ended it; 137 after kill() or the deadline), and rejects when
   * abortSignal aborted.
   */
  spawn(options: SandboxSpawnOptions & { stdin: true }): Promise<WritableSandboxProcess>;
  spawn(options: SandboxSpawnOptions & { stdin?: false }): Promise<SandboxProcess>;
  spawn(options: SandboxSpawnOptions): Promise<SandboxProcess | WritableSandboxProcess>;
  async spawn(options: SandboxSpawnOptions): Promise<SandboxProcess | WritableSandboxProcess> {
    const cmd = await this.command({ ...this.processOptions(options), stream: true, ...(options.stdin ? { stdin: true } : {}) });
    const signal = options.abortSignal;
    const proc: SandboxProcess = {
      stdout: cmd.stdout,
      stderr: cmd.stderr,
      result: cmd.result,
      wait: async () => {
        const r = await cmd.result;
        if (signal?.aborted) throw signal.reason;
        return { exitCode: r.exitCode ?? exitCodeOf(r) };
      },
      kill: () => cmd.kill(),
    };
    return cmd.stdin ? { ...proc, stdin: cmd.stdin } : proc;
  }
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };

/**
 * A command stopped by kill(), an abort or its deadline has no exit code of
 * its own: it was killed, so 128 + the signal's number (SIGKILL's, 137, when
 * codepod names none), as a shell would say.
 */
function exitCodeOf(r: CommandResult): number {
  return 128 + ((r.signal && SIGNALS[r.signal]) || 9);
}

/** How many files listWorkspace gives at most. */
export const MAX_LISTED_FILES = 1000;

/** The workspace's files (paths relative to it), breadth first, at most `max`; symlinks are not followed. */
export async function listWorkspace(sb: CodepodSandbox, max = MAX_LISTED_FILES): Promise<string[]> {
  const out: string[] = [];
  const dirs = ["."];
  while (dirs.length && out.length < max) {
    const dir = dirs.shift()!;
    const entries = (await sb.listDirectory({ path: dir })) ?? [];
    for (const e of entries) {
      const p = dir === "." ? e.name : `${dir}/${e.name}`;
      if (e.type === "directory") dirs.push(p);
      else if (e.type === "file" && out.length < max) out.push(p);
    }
  }
  return out;
}

function signalOpt(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal ? { signal } : {};
}
