"""The mutation list (tests/mutation/mutations.txt): read, check, apply.

Used by tests/mutation/run.sh; Debian's /usr/bin/python3, stdlib only.

    mutations.py names LIST                 every mutation's name, in order
    mutations.py what LIST NAME             its one-line description
    mutations.py timeout LIST NAME          its time bound per test, seconds
    mutations.py tests LIST NAME            its tests, one a line, words
                                            separated by tabs
    mutations.py apply LIST NAME TREE       applies it to the checkout TREE
    mutations.py check LIST TREE [NAME...]  checks that each one applies to
                                            TREE, changing nothing

An edit replaces a text that must occur exactly once in its file: a text
found no time or more than once means the code moved on and the mutation
is stale, which is said (exit status 3) and never counted as caught.

Exit status: 0, 2 for a malformed list or unknown name, 3 for a stale one.
"""
import shlex
import sys
from pathlib import Path

FIELDS = ("what", "test", "timeout", "edit")


class ListError(Exception):
    pass


class Stale(Exception):
    pass


def parse(path):
    """[{name, what, tests: [[word...]], timeout, edits: [(file, old, new)], line}]"""
    lines = Path(path).read_text().split("\n")
    muts, cur, i = [], None, 0

    def where(n):
        return f"{path}:{n + 1}"
    while i < len(lines):
        line = lines[i]
        if line.startswith("== "):
            cur = {"name": line[3:].strip(), "what": "", "tests": [], "timeout": None,
                   "edits": [], "line": i + 1}
            if not cur["name"] or any(c.isspace() for c in cur["name"]):
                raise ListError(f"{where(i)}: a name is one word")
            if any(m["name"] == cur["name"] for m in muts):
                raise ListError(f"{where(i)}: {cur['name']} is named twice")
            muts.append(cur)
            i += 1
            continue
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        key, sep, value = line.partition(":")
        if not sep or key not in FIELDS or cur is None:
            raise ListError(f"{where(i)}: expected `== NAME` or one of {', '.join(FIELDS)}: "
                            f"{line[:80]!r}")
        value = value.strip()
        if key == "what":
            cur["what"] = value
        elif key == "timeout":
            if not value.isdigit() or int(value) == 0:
                raise ListError(f"{where(i)}: timeout is a number of seconds")
            cur["timeout"] = int(value)
        elif key == "test":
            words = shlex.split(value)
            if not words or words[0] not in ("unit", "pytest", "make"):
                raise ListError(f"{where(i)}: a test is `unit NAME`, `pytest [VAR=VALUE...] "
                                "ARGS...` or `make TARGET`")
            if any("\t" in w or "\n" in w for w in words):
                raise ListError(f"{where(i)}: no tabs in a test")
            cur["tests"].append(words)
        else:  # edit: FILE, then <<< OLD === NEW >>>, each marker on a line of its own
            if not value:
                raise ListError(f"{where(i)}: edit: names the file")
            start = i
            i += 1
            if i >= len(lines) or lines[i] != "<<<":
                raise ListError(f"{where(start)}: an edit's text starts with a line `<<<`")
            old, new, part = [], [], None
            i += 1
            part = old
            while i < len(lines) and lines[i] != ">>>":
                if lines[i] == "===" and part is old:
                    part = new
                else:
                    part.append(lines[i])
                i += 1
            if i >= len(lines) or part is old:
                raise ListError(f"{where(start)}: an edit is <<< OLD === NEW >>>")
            if not old or not "\n".join(old).strip():
                raise ListError(f"{where(start)}: an edit's text to replace is empty")
            cur["edits"].append((value, "\n".join(old), "\n".join(new)))
        i += 1
    for m in muts:
        for need in ("what", "tests", "edits"):
            if not m[need]:
                raise ListError(f"{path}:{m['line']}: {m['name']} has no {need}")
    return muts


def find(muts, name):
    for m in muts:
        if m["name"] == name:
            return m
    raise ListError(f"no mutation named {name}")


def edited(tree, m):
    """{file: new text} for mutation m on tree; Stale when an edit does not fit."""
    out = {}
    for file, old, new in m["edits"]:
        p = Path(tree) / file
        if file not in out:
            try:
                out[file] = p.read_text()
            except OSError as e:
                raise Stale(f"{m['name']}: {file}: {e.strerror}")
        n = out[file].count(old)
        if n != 1:
            first = old.strip().split("\n")[0].strip()
            raise Stale(f"{m['name']}: {file}: the text to replace is found {n} times, "
                        f"not once (it starts: {first[:70]!r}): the mutation is stale")
        out[file] = out[file].replace(old, new)
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, lst, rest = argv[1], argv[2], argv[3:]
    try:
        muts = parse(lst)
        if cmd == "names" and not rest:
            for m in muts:
                print(m["name"])
        elif cmd == "what" and len(rest) == 1:
            print(find(muts, rest[0])["what"])
        elif cmd == "timeout" and len(rest) == 1:
            print(find(muts, rest[0])["timeout"] or "")
        elif cmd == "tests" and len(rest) == 1:
            for words in find(muts, rest[0])["tests"]:
                print("\t".join(words))
        elif cmd == "apply" and len(rest) == 2:
            for file, text in edited(rest[1], find(muts, rest[0])).items():
                (Path(rest[1]) / file).write_text(text)
        elif cmd == "check" and rest:
            stale = 0
            for m in [find(muts, n) for n in rest[1:]] or muts:
                try:
                    edited(rest[0], m)
                except Stale as e:
                    print(f"mutation: {e}", file=sys.stderr)
                    stale += 1
            return 3 if stale else 0
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except ListError as e:
        print(f"mutation: {e}", file=sys.stderr)
        return 2
    except Stale as e:
        print(f"mutation: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
