// The workspace's files over the session protocol: reads and writes travel
// base64 in chunks of at most 256 KiB, each acknowledged before the next, so
// neither side holds more than a chunk or two of a file whatever its size.
import { CodepodError, Inbox, errorOf, notConnected, request, type Channel, type Msg } from "./ops.js";

/** The largest chunk of raw bytes one file_chunk carries. */
export const CHUNK_BYTES = 256 * 1024;

/** What a finished read or write says of the file. */
export interface FileMeta {
  /** The file's whole size (for a read with a range too). */
  size: number;
  /** Lowercase hex SHA-256 of the file's whole content. */
  etag: string;
  /** A write: true when there was no file at the path before. */
  created?: boolean;
}

export interface FileStat {
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  mode: number;
  mtimeMs: number;
}

export interface DirectoryEntry {
  name: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
}

export interface DirectoryPage {
  entries: DirectoryEntry[];
  /** A cursor for the rest; absent at the end. */
  next?: string;
}

export interface ReadRange {
  offset?: number;
  length?: number;
}

export interface OpenedRead {
  /** The bytes, chunk by chunk: the next chunk is asked for only when this one is read. */
  stream: ReadableStream<Uint8Array>;
  /** A file's whole size and etag, known before its bytes (for a Content-Length or an ETag); absent for an archive. */
  size?: number;
  etag?: string;
  /** Settles once the last chunk arrived: size and etag for a file, size for an archive. */
  done: Promise<Msg>;
}

function bytesOf(b64: unknown): Uint8Array {
  const b = Buffer.from(typeof b64 === "string" ? b64 : "", "base64");
  return new Uint8Array(b.buffer, b.byteOffset, b.length);
}

const b64 = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength).toString("base64");

/**
 * Starts a read (file_read or archive_read) and resolves once codepod answered
 * its first message: a missing file rejects here with NOT_FOUND, before any
 * stream exists. Cancelling the stream (or the abort signal) sends `stop`:
 * codepod ends the read CANCELLED instead of sending the rest of the file
 * (`done` then rejects with CANCELLED), and chunks already on their way are
 * dropped unacknowledged.
 */
export async function openRead(ch: Channel, first: Omit<Msg, "id">, signal?: AbortSignal): Promise<OpenedRead> {
  if (!(await ch.ready())) throw notConnected();
  return new Promise((resolve, reject) => {
    const id = ch.newId();
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let started = false;
    let pendingAck = false;
    let discard = false;
    let stopped = false;
    let finished = false;
    let settle!: { resolve(m: Msg): void; reject(e: Error): void };
    const done = new Promise<Msg>((res, rej) => { settle = { resolve: res, reject: rej }; });
    done.catch(() => { /* reported through the stream or the opening promise */ });
    const ack = () => ch.send({ type: "file_ack", id });
    // The reader wants no more: codepod stops reading the file rather than
    // sending the rest to be thrown away (a text read of a few lines of a
    // large file, bash-tool's `head`, ends here).
    const stopRead = () => {
      discard = true;
      pendingAck = false;
      if (stopped || finished) return;
      stopped = true;
      ch.send({ type: "stop", id });
    };
    const stream = new ReadableStream<Uint8Array>({
      start(c) { controller = c; },
      pull() {
        if (pendingAck) {
          pendingAck = false;
          ack();
        }
      },
      cancel() {
        stopRead();
      },
    }, { highWaterMark: 1 });
    const begin = (m: Msg) => {
      if (started) return;
      started = true;
      const opened: OpenedRead = { stream, done };
      if (typeof m.size === "number") opened.size = m.size;
      if (typeof m.etag === "string") opened.etag = m.etag;
      resolve(opened);
    };
    const fail = (e: CodepodError) => {
      if (finished) return;
      finished = true;
      ch.end(id);
      signal?.removeEventListener("abort", onAbort);
      settle.reject(e);
      if (!started) {
        started = true;
        reject(e);
      } else if (!discard) {
        controller.error(e);
      }
    };
    const onAbort = () => {
      if (!started) {
        stopRead();
        fail(new CodepodError("CANCELLED", "the read was aborted"));
      } else if (!finished) {
        controller.error(signal?.reason ?? new CodepodError("CANCELLED", "the read was aborted"));
        stopRead();
      }
    };
    const ok = ch.start(id, {
      message(m) {
        if (finished) return;
        if (m.type === "file_chunk") {
          begin(m);
          if (discard) return;
          controller.enqueue(bytesOf(m.data));
          if ((controller.desiredSize ?? 0) > 0) ack();
          else pendingAck = true;
        } else if (m.type === "file_result") {
          finished = true;
          ch.end(id);
          signal?.removeEventListener("abort", onAbort);
          begin(m);
          if (!discard) controller.close();
          settle.resolve(m);
        } else if (m.type === "error") {
          fail(errorOf(m));
        }
      },
      down: fail,
    }, { ...first, id });
    if (!ok) {
      reject(notConnected());
      return;
    }
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Everything a read stream holds, as one array. */
export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const p of stream) {
    parts.push(p);
    n += p.length;
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export type WriteSource = Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

async function* pieces(src: WriteSource): AsyncGenerator<Uint8Array> {
  if (src instanceof Uint8Array) {
    yield src;
    return;
  }
  yield* src as AsyncIterable<Uint8Array>;
}

/**
 * A write (file_write or archive_write): waits for codepod's ready ack, sends
 * the content in chunks of at most CHUNK_BYTES, each non-last one answered by
 * an ack before the next, then a chunk with `last` (empty when the content
 * ended on a chunk boundary), and resolves with the file_result. The content
 * is read only as fast as codepod takes it.
 */
export async function write(ch: Channel, first: Omit<Msg, "id">, src: WriteSource, signal?: AbortSignal): Promise<Msg> {
  if (!(await ch.ready())) throw notConnected();
  const id = ch.newId();
  const inbox = new Inbox();
  if (!ch.start(id, inbox.handler, { ...first, id })) throw notConnected();
  let ended = false;
  const onAbort = () => inbox.fail(signal?.reason instanceof Error ? signal.reason : new CodepodError("CANCELLED", "the write was aborted"));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await inbox.next(); // ready
    let held: Uint8Array[] = [];
    let heldBytes = 0;
    const flush = async (upTo: number) => {
      const chunk = new Uint8Array(upTo);
      let at = 0;
      while (at < upTo) {
        const p = held[0]!;
        const take = Math.min(p.length, upTo - at);
        chunk.set(p.subarray(0, take), at);
        at += take;
        if (take === p.length) held.shift();
        else held[0] = p.subarray(take);
      }
      heldBytes -= upTo;
      if (!ch.send({ type: "file_chunk", id, data: b64(chunk) })) throw notConnected();
      await inbox.next(); // its ack
    };
    for await (const p of pieces(src)) {
      if (!(p instanceof Uint8Array)) throw new TypeError("file content must be bytes (Uint8Array)");
      if (!p.length) continue;
      held.push(p);
      heldBytes += p.length;
      while (heldBytes > CHUNK_BYTES) await flush(CHUNK_BYTES);
    }
    // What is left (at most one chunk) goes out with `last`.
    const rest = new Uint8Array(heldBytes);
    let at = 0;
    for (const p of held) {
      rest.set(p, at);
      at += p.length;
    }
    held = [];
    if (!ch.send({ type: "file_chunk", id, data: b64(rest), last: true })) throw notConnected();
    const res = await inbox.next();
    ended = true;
    return res;
  } catch (e) {
    // Abandoned half way (the content failed, or the abort): codepod drops the
    // partial upload and keeps the old file.
    if (!ended && !inbox.answeredError) ch.send({ type: "stop", id });
    throw e;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    ch.end(id);
  }
}

export interface ConversationFiles {
  read(path: string, range?: ReadRange, signal?: AbortSignal): Promise<OpenedRead>;
  write(path: string, src: WriteSource, opts?: { ifMatch?: string; mode?: number; signal?: AbortSignal }): Promise<FileMeta>;
  stat(path: string): Promise<FileStat>;
  list(path: string, opts?: { limit?: number; cursor?: string }): Promise<DirectoryPage>;
  delete(path: string, opts?: { recursive?: boolean }): Promise<void>;
  readArchive(signal?: AbortSignal): Promise<OpenedRead>;
  writeArchive(src: WriteSource, signal?: AbortSignal): Promise<{ files: number }>;
}

/** The file operations of one conversation, paths relative to its workspace. */
export function conversationFiles(ch: Channel, conversation: string): ConversationFiles {
  return {
    read: (path, range = {}, signal) => openRead(ch, {
      type: "file_read", conversation, path,
      ...(range.offset !== undefined ? { offset: range.offset } : {}),
      ...(range.length !== undefined ? { length: range.length } : {}),
    }, signal),
    write: async (path, src, opts = {}) => {
      const m = await write(ch, {
        type: "file_write", conversation, path,
        ...(opts.ifMatch !== undefined ? { ifMatch: opts.ifMatch } : {}),
        ...(opts.mode !== undefined ? { mode: opts.mode } : {}),
      }, src, opts.signal);
      const meta: FileMeta = { size: Number(m.size), etag: String(m.etag) };
      if (typeof m.created === "boolean") meta.created = m.created;
      return meta;
    },
    stat: async (path) => (await request(ch, { type: "file_stat", conversation, path })).stat as FileStat,
    list: async (path, opts = {}) => {
      const m = await request(ch, {
        type: "file_list", conversation, path,
        ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
        ...(opts.cursor !== undefined ? { cursor: opts.cursor } : {}),
      });
      const page: DirectoryPage = { entries: (m.entries ?? []) as DirectoryEntry[] };
      if (typeof m.next === "string") page.next = m.next;
      return page;
    },
    delete: async (path, opts = {}) => {
      await request(ch, { type: "file_delete", conversation, path, ...(opts.recursive ? { recursive: true } : {}) });
    },
    readArchive: (signal) => openRead(ch, { type: "archive_read", conversation }, signal),
    writeArchive: async (src, signal) => {
      const m = await write(ch, { type: "archive_write", conversation }, src, signal);
      return { files: Number(m.files) };
    },
  };
}
