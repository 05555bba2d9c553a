// The policy's keys and values checked where the application passes them
// (codeModeTool(), run()), so that a typo in untyped JavaScript throws in the
// application's code instead of failing every program with an
// INVALID_REQUEST the model is shown and cannot fix. The server checks the
// same rules (runner/policy.c) and its ceilings, which only it knows.

/** Every key the server takes, in its order (docs/contract.md §3). */
export const POLICY_KEYS = [
  "timeoutMs", "startupTimeoutMs", "maxSourceBytes", "maxResultBytes", "maxBridgeRequests",
  "maxInFlightBridgeRequests", "maxToolInputBytes", "maxToolOutputBytes", "maxMemoryMb", "maxCpuMs",
  "maxWorkspaceBytes", "maxWorkspaceFiles",
] as const;

/** Throws a TypeError naming the first key or value codepod would refuse. */
export function checkPolicy(policy: unknown, where: string): void {
  if (policy === undefined || policy === null) return;
  if (typeof policy !== "object" || Array.isArray(policy)) throw new TypeError(`${where}: policy must be an object`);
  for (const [key, value] of Object.entries(policy as Record<string, unknown>)) {
    if (value === undefined) continue;
    if (!(POLICY_KEYS as readonly string[]).includes(key)) {
      const near = POLICY_KEYS.find((k) => k.toLowerCase() === key.toLowerCase());
      throw new TypeError(`${where}: policy.${key} is not a policy field` +
        (near ? ` (did you mean ${near}?)` : ` (known: ${POLICY_KEYS.join(", ")})`));
    }
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
      throw new TypeError(`${where}: policy.${key} must be a positive integer`);
    }
  }
}
