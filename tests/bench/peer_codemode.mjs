// peer_codemode.mjs - `make bench`: runs the bench's workloads in
// @ai-sdk/code-mode, in this process, the way a TypeScript backend would
// (experimental_runCodeMode, tools with execute()). bench_latency.py starts it
// with the project's Node 22 and sends one JSON line per run; each answer is
// one JSON line with the time measured here, call to settled.
//
//   node peer_codemode.mjs INSTALL_DIR DATA_DIR
//
// INSTALL_DIR holds node_modules/@ai-sdk/code-mode and node_modules/ai.
// Requests: {"w":"return1"} {"w":"invoices"} {"w":"calls","n":2000}
//           {"w":"concurrent","n":100,"delayMs":500,"maxWorkers":N?}
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, data] = process.argv.slice(2);
const mod = (p) => import(pathToFileURL(join(dir, 'node_modules', p)).href);
const cm = await mod('@ai-sdk/code-mode/dist/index.js');
const ai = await mod('ai/dist/index.js');
const { experimental_runCodeMode: runCodeMode, experimental_setMaxWorkers: setMaxWorkers } = cm;
const { tool, jsonSchema } = ai;

const invoices = JSON.parse(readFileSync(join(data, 'invoices.json'), 'utf8'));
const firms = JSON.parse(readFileSync(join(data, 'firms.json'), 'utf8'));
const INVOICES_JS = readFileSync(join(data, '..', 'invoices.js'), 'utf8');
// What tests/example/tools/list_invoices.py answers.
const invoicesOf = (month) => invoices.filter((i) => i.month === month)
  .map((i) => ({ firmId: i.firmId, amountCents: i.amountCents, status: i.status }));
const anyObject = jsonSchema({ type: 'object', additionalProperties: true });

const tools = {
  listInvoices: tool({ description: 'invoices of a month', inputSchema: anyObject,
    execute: async ({ month }) => invoicesOf(month) }),
  listFirms: tool({ description: 'firms', inputSchema: anyObject, execute: async () => firms }),
  echo: tool({ description: 'echo', inputSchema: anyObject, execute: async (x) => x }),
  wait: tool({ description: 'answers late', inputSchema: anyObject,
    execute: (x) => new Promise((r) => setTimeout(() => r(x), x.ms)) }),
};

const CALLS_JS = (n) => `const n = ${n};
for (let i = 0; i < n; i++) {
  const r = await tools.echo({ i });
  if (r.i !== i) throw new Error('echo returned ' + JSON.stringify(r));
}
return n;`;

async function timed(js, policy) {
  const t0 = process.hrtime.bigint();
  let ok = true, err = null, result;
  try {
    result = await runCodeMode({ js, tools, options: { executionPolicy: policy || {} } });
  } catch (e) {
    ok = false;
    err = `${e && e.name}: ${e && e.message}`.slice(0, 300);
  }
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, ok, err, result };
}

async function handle(req) {
  switch (req.w) {
    case 'return1': return timed('return 1');
    case 'invoices': return timed(INVOICES_JS);
    case 'calls': {
      const r = await timed(CALLS_JS(req.n), { maxBridgeRequests: req.n + 10 });
      return { ...r, result: undefined };
    }
    case 'concurrent': {
      if (req.maxWorkers) setMaxWorkers(req.maxWorkers);
      const t0 = process.hrtime.bigint();
      const js = `return await tools.wait({ ms: ${req.delayMs} });`;
      const rs = await Promise.all(Array.from({ length: req.n }, () => timed(js)));
      if (req.maxWorkers) setMaxWorkers(32);
      const failed = rs.filter((r) => !r.ok);
      return { ms: Number(process.hrtime.bigint() - t0) / 1e6, ok: failed.length === 0,
               succeeded: rs.length - failed.length, err: failed[0] ? failed[0].err : null };
    }
    default: return { ok: false, err: 'unknown workload' };
  }
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const out = await handle(JSON.parse(line));
  process.stdout.write(JSON.stringify(out) + '\n');
}
