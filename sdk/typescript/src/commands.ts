// Shell commands in a conversation's sandbox (the `command` message): a
// fresh process beside the programs, with the same isolation and limits. Its
// output can stream as it comes, its stdin can be written, `stop` kills it.
import { CodepodError, errorOf, notConnected, type Channel, type Msg } from "./ops.js";
import type { Policy, Usage } from "./types.js";

export interface CommandOptions {
  /** A shell line, run by `/bin/sh -c`. Exactly one of `command` and `argv`. */
  command?: string;
  argv?: string[];
  /** A directory relative to the workspace (default: the workspace). */
  cwd?: string;
  env?: Record<string, string>;
  /** Keep stdin open for `stdin` writes (else it is empty). */
  stdin?: boolean;
  /** Stream stdout and stderr as they come (`stdout`/`stderr` streams, `onOutput`). */
  stream?: boolean;
  policy?: Policy;
  /** Aborting it stops the command (it ends CANCELLED). */
  signal?: AbortSignal;
  /** Each piece of streamed output, as it comes. */
  onOutput?: (stream: "stdout" | "stderr", data: Uint8Array) => void;
  /** Streamed bytes kept unread per stream (default MAX_UNREAD_BYTES). */
  maxUnreadBytes?: number;
  /** The command's id; a fresh one by default. */
  id?: string;
}

/** How a command ended. A command that exits by itself, with any code, is "ok". */
export interface CommandResult {
  status: "ok" | "error";
  /** null when status is "error" (stopped, or past its deadline). */
  exitCode: number | null;
  /** The signal that ended it ("SIGKILL"); exitCode is then 128 + its number. */
  signal?: string;
  /** UTF-8 text, bounded like logs. */
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  usage?: Usage;
  executionId?: string;
  /** TIMEOUT, CANCELLED, SANDBOX_UNAVAILABLE, ... when status is "error". */
  error?: { code: string; message: string };
}

/**
 * Unread streamed output a command keeps per stream: codepod does not wait
 * for a reader (a command's output has no flow control), so a stream nobody
 * reads must not grow with everything the command prints.
 */
export const MAX_UNREAD_BYTES = 8 * 1024 * 1024;

/** A command that codepod accepted and that may still run. */
export interface Command {
  readonly id: string;
  /** Streamed stdout bytes (empty unless `stream` was asked for); ends with the
   * command. At most maxUnreadBytes wait unread; what came past that is
   * dropped and counted in `dropped` (`onOutput` still gets all of it). */
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /** Streamed bytes dropped because their stream was not read fast enough. */
  readonly dropped: { stdout: number; stderr: number };
  /** Its stdin (only with `stdin: true`): closing it sends EOF. */
  readonly stdin?: WritableStream<Uint8Array>;
  /** Settles with the result; rejects only when the session lost the command. */
  readonly result: Promise<CommandResult>;
  /** Stops it (stop); resolves once it ended. Idempotent. */
  kill(): Promise<void>;
}

const STDIN_CHUNK = 256 * 1024;

/** Sends the command; resolves once codepod accepted it, rejects with its refusal. */
export async function startCommand(ch: Channel, conversation: string, opts: CommandOptions): Promise<Command> {
  if ((opts.command === undefined) === (opts.argv === undefined)) {
    throw new TypeError("a command needs exactly one of command and argv");
  }
  if (!(await ch.ready())) throw notConnected();
  const id = opts.id ?? ch.newId();
  const msg: Msg = { type: "command", id, conversation };
  if (opts.command !== undefined) msg.command = opts.command;
  if (opts.argv !== undefined) msg.argv = opts.argv;
  if (opts.cwd !== undefined) msg.cwd = opts.cwd;
  if (opts.env !== undefined) msg.env = opts.env;
  if (opts.stdin) msg.stdin = true;
  if (opts.stream) msg.stream = true;
  if (opts.policy) msg.policy = opts.policy;
  return new Promise((resolve, reject) => {
    let accepted = false;
    let ended = false;
    let out!: ReadableStreamDefaultController<Uint8Array>;
    let err!: ReadableStreamDefaultController<Uint8Array>;
    const unread = { highWaterMark: opts.maxUnreadBytes ?? MAX_UNREAD_BYTES, size: (c: Uint8Array) => c.byteLength };
    const stdout = new ReadableStream<Uint8Array>({ start(c) { out = c; } }, unread);
    const stderr = new ReadableStream<Uint8Array>({ start(c) { err = c; } }, unread);
    const dropped = { stdout: 0, stderr: 0 };
    let settle!: { resolve(r: CommandResult): void; reject(e: Error): void };
    const result = new Promise<CommandResult>((res, rej) => { settle = { resolve: res, reject: rej }; });
    result.catch(() => { /* the caller's to see */ });
    const closeStreams = (e?: Error) => {
      for (const c of [out, err]) {
        try {
          if (e) c.error(e);
          else c.close();
        } catch {
          // already closed by a cancelled reader
        }
      }
    };
    const onAbort = () => { ch.send({ type: "stop", id }); };
    const finish = (r: CommandResult | CodepodError) => {
      if (ended) return;
      ended = true;
      ch.end(id);
      opts.signal?.removeEventListener("abort", onAbort);
      if (r instanceof CodepodError) {
        closeStreams(r);
        if (!accepted) reject(r);
        settle.reject(r);
      } else {
        closeStreams();
        settle.resolve(r);
      }
    };
    let stdin: WritableStream<Uint8Array> | undefined;
    if (opts.stdin) {
      const sendStdin = (m: Msg) => {
        if (ended) throw new CodepodError("PROCESS_EXITED", "the command has ended");
        if (!ch.send(m)) throw notConnected();
      };
      stdin = new WritableStream<Uint8Array>({
        write(chunk) {
          for (let at = 0; at < chunk.length; at += STDIN_CHUNK) {
            const part = chunk.subarray(at, at + STDIN_CHUNK);
            sendStdin({ type: "command_stdin", id, data: Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString("base64") });
          }
        },
        close() { if (!ended) sendStdin({ type: "command_stdin", id, eof: true }); },
        abort() { if (!ended) sendStdin({ type: "command_stdin", id, eof: true }); },
      });
    }
    const cmd: Command = {
      id, stdout, stderr, result, dropped,
      ...(stdin ? { stdin } : {}),
      kill: async () => {
        if (!ended) ch.send({ type: "stop", id });
        await result.then(() => undefined, () => undefined);
      },
    };
    const ok = ch.start(id, {
      reattach: true,
      message(m) {
        switch (m.type) {
          case "accepted":
            if (!accepted) {
              accepted = true;
              resolve(cmd);
            }
            return;
          case "command_output": {
            const b = Buffer.from(typeof m.data === "string" ? m.data : "", "base64");
            const bytes = new Uint8Array(b.buffer, b.byteOffset, b.length);
            const which = m.stream === "stderr" ? "stderr" : "stdout";
            const c = which === "stderr" ? err : out;
            if ((c.desiredSize ?? 0) < bytes.length) {
              dropped[which] += bytes.length;
            } else {
              try {
                c.enqueue(bytes);
              } catch {
                // a reader that cancelled its stream wants no more
              }
            }
            try {
              opts.onOutput?.(which, bytes);
            } catch {
              // a throwing onOutput must not end the session
            }
            return;
          }
          case "command_result": {
            if (!accepted) {
              accepted = true;
              resolve(cmd);
            }
            const { type: _t, id: _i, ...rest } = m;
            finish(rest as unknown as CommandResult);
            return;
          }
          case "error": {
            const inReplyTo = m.inReplyTo;
            // Refused outright, or a re-attach that found nothing: it is over for us.
            if (!accepted || inReplyTo === "command" || inReplyTo === "attach") finish(errorOf(m));
            return;
          }
          default:
        }
      },
      down: (e) => finish(e),
    }, msg);
    if (!ok) {
      reject(notConnected());
      return;
    }
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });
  });
}
