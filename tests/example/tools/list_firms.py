#!/usr/bin/python3
"""listFirms for `codepod run`: takes {} on stdin, prints the firms as [{id, name}]."""
import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "firms.json"


def main():
    try:
        request = json.load(sys.stdin)
    except ValueError:
        sys.exit("listFirms: the input is not JSON")
    if not isinstance(request, dict):
        sys.exit("listFirms: the input must be an object")
    firms = [{"id": f["id"], "name": f["name"]} for f in json.loads(DATA.read_text())]
    json.dump(firms, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
