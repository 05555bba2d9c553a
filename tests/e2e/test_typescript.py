"""docs/contract.md §2.1: TypeScript annotations are stripped (Node's own stripper), not transformed."""

from harness import assert_failed, assert_ok


def test_typescript_types_are_stripped(session):
    session.serve({"listInvoices": lambda inp: [{"firmId": "f1", "amountCents": 1200, "status": "paid"},
                                                {"firmId": "f2", "amountCents": 800, "status": "void"}]})
    js = """interface Invoice {
  firmId: string;
  amountCents: number;
  status: "paid" | "void";
}
type Totals = Record<string, number>;
function sum<T>(xs: T[], f: (x: T) => number): number {
  return xs.reduce((acc: number, x: T) => acc + f(x), 0);
}
const rows = (await tools.listInvoices({ month: "2026-08" })) as Invoice[];
const paid: Invoice[] = rows.filter((r: Invoice): boolean => r.status === "paid");
const totals: Totals = {};
for (const r of paid) totals[r.firmId] = (totals[r.firmId] ?? 0) + r.amountCents;
const first = ["a", "b"] as const;
let maybe: string | undefined = undefined;
const n = (maybe as unknown as number | undefined) ?? sum<Invoice>(paid, (r) => r.amountCents);
return { totals, n, first: first[0], generic: sum<number>([1, 2, 3], (x) => x) };
"""
    res = assert_ok(session.run(js))
    assert res["result"] == {"totals": {"f1": 1200}, "n": 1200, "first": "a", "generic": 6}


def test_typescript_error_line_numbers_match_the_source(session):
    js = ("interface P {\n"
          "  x: number;\n"
          "}\n"
          "const p: P = { x: 1 } as P;\n"
          "throw new Error(`bad ${p.x as number}`);\n")
    pe = assert_failed(session.run(js), "SCRIPT_ERROR")["programError"]
    assert pe["message"] == "bad 1"
    assert ":5:" in pe["stack"], pe["stack"]


def test_typescript_enum_is_a_script_error(session):
    res = session.run("enum Color { Red, Green }\nreturn Color.Green;")
    assert_failed(res, "SCRIPT_ERROR")
    assert "result" not in res


def test_typescript_namespace_with_code_is_a_script_error(session):
    res = session.run("namespace N { export const x = 1; }\nreturn N.x;")
    assert_failed(res, "SCRIPT_ERROR")
