#!/usr/bin/python3
"""listInvoices for `codepod run`: input JSON on stdin, output JSON on stdout.

A non-zero exit makes the script's call reject; the last stderr line is the
safe message the model sees.
"""
import json
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "invoices.json"


def main():
    try:
        request = json.load(sys.stdin)
    except ValueError:
        sys.exit("listInvoices: the input is not JSON")
    month = request.get("month") if isinstance(request, dict) else None
    if not isinstance(month, str) or not re.fullmatch(r"\d{4}-\d{2}", month):
        sys.exit("listInvoices: month must be a string YYYY-MM")
    rows = [
        {"firmId": inv["firmId"], "amountCents": inv["amountCents"], "status": inv["status"]}
        for inv in json.loads(DATA.read_text())
        if inv["month"] == month
    ]
    json.dump(rows, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
