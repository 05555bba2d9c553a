// "Always allow this": approvals remembered for an exact program, tool and
// input, so a backend need not ask a person again. codepod knows nothing of
// it: each run of a program still suspends, and the backend answers from
// here. The program is named by its digest (outcome.usage.digest: source,
// tools and policy), the input by the SHA-256 of its JSON with sorted keys.
import { createHash } from "node:crypto";
import type { Decision, Outcome, PendingCall } from "./types.js";

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

export class ApprovalMemory {
  private readonly allowed = new Set<string>();

  private key(digest: string, p: PendingCall): string {
    const input = createHash("sha256").update(canonical(p.input)).digest("hex");
    return `${digest}\n${p.tool}\n${input}`;
  }

  /** Remember a person's yes to this pending call of this outcome's program. */
  allow(outcome: Outcome, call: string): void {
    const p = outcome.pending?.find((x) => x.call === call);
    if (!p || !outcome.usage?.digest) throw new Error(`call ${call} is not pending in this outcome`);
    this.allowed.add(this.key(outcome.usage.digest, p));
  }

  /** The decisions already made for a suspended outcome, and the calls still to ask about. */
  decide(outcome: Outcome): { decisions: Decision[]; ask: PendingCall[] } {
    const digest = outcome.usage?.digest ?? "";
    const decisions: Decision[] = [];
    const ask: PendingCall[] = [];
    for (const p of outcome.pending ?? []) {
      if (digest && this.allowed.has(this.key(digest, p))) decisions.push({ call: p.call, approved: true });
      else ask.push(p);
    }
    return { decisions, ask };
  }
}
