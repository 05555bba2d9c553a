// Requests of a session that are not executions (files and commands): each
// has an id from the same namespace as execution ids and a handler that sees
// every message carrying that id. The Codepod session owns the registry; the
// file and command modules talk to it only through a Channel.

export type Msg = { [k: string]: unknown; type?: unknown; id?: unknown };

/** What codepod refused or reported, with its code (NOT_FOUND, PRECONDITION_FAILED, TOO_LARGE, ...). */
export class CodepodError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "CodepodError";
    this.code = code;
  }
}

/** The error an `error` message carries (`{ error: { code, message } }`, or the two at the top). */
export function errorOf(m: Msg): CodepodError {
  const e = (m.error && typeof m.error === "object" ? m.error : m) as { code?: unknown; message?: unknown };
  return new CodepodError(typeof e.code === "string" ? e.code : "INTERNAL",
    typeof e.message === "string" ? e.message : "codepod refused the request");
}

export interface OpHandler {
  /** Every message with this op's id, in order. */
  message(m: Msg): void;
  /** The session lost the op: the link went down for good, or a re-attach failed. */
  down(err: CodepodError): void;
  /** A command: over a WebSocket it is re-attached after a reconnect, like an execution. */
  reattach?: boolean;
}

export interface Channel {
  /** Resolves once there is a link (a WebSocket session reconnects if it dropped); false when there is none to be had. */
  ready(): Promise<boolean>;
  /** A fresh id, unused by any live execution or op of this session. */
  newId(): string;
  /** Registers the handler, then sends the op's first message; false when the link is down (nothing registered). */
  start(id: string, h: OpHandler, first: Msg): boolean;
  send(msg: Msg): boolean;
  /** Forgets the op (after its last message). */
  end(id: string): void;
}

/** Messages of one op, taken one at a time (a request answered step by step). */
export class Inbox {
  private readonly queue: Msg[] = [];
  private waiter: { resolve(m: Msg): void; reject(e: Error): void } | undefined;
  private failure: Error | undefined;
  /** codepod answered with an error: the op is over on its side. */
  answeredError = false;

  readonly handler: OpHandler = {
    message: (m) => {
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = undefined;
        w.resolve(m);
      } else {
        this.queue.push(m);
      }
    },
    down: (e) => this.fail(e),
  };

  fail(e: Error): void {
    this.failure ??= e;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(e);
  }

  /** The next message; an `error` message rejects with its CodepodError. */
  async next(): Promise<Msg> {
    const m = this.queue.shift() ?? (this.failure ? undefined : await new Promise<Msg>((resolve, reject) => {
      this.waiter = { resolve, reject };
    }));
    if (!m) throw this.failure!;
    if (m.type === "error") {
      this.answeredError = true;
      throw errorOf(m);
    }
    return m;
  }
}

/** One request answered by one message (file_result): that message, or the error's CodepodError. */
export async function request(ch: Channel, msg: Omit<Msg, "id">): Promise<Msg> {
  if (!(await ch.ready())) throw notConnected();
  const id = ch.newId();
  const inbox = new Inbox();
  if (!ch.start(id, inbox.handler, { ...msg, id })) throw notConnected();
  try {
    return await inbox.next();
  } finally {
    ch.end(id);
  }
}

export function notConnected(): CodepodError {
  return new CodepodError("SANDBOX_UNAVAILABLE", "codepod is not connected");
}
