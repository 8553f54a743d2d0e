#!/usr/bin/env python3
"""The room table of docs/architecture.md, made from the sources.

A room is a folder of Sources/PushRelay (files in its subfolders count as the room's). For each room
the scan finds what it declares at the top level of its files (struct, class, enum, actor, protocol,
typealias, func, let, var; private and fileprivate ones are left out, since no other room can name
them) and the members it declares in extensions (`extension Dispatcher { struct StateMachine … }`),
then which other rooms' declarations its code names. Comments and string literals are skipped
(the code inside a string's interpolation is read). A top-level type counts wherever its name
appears; a top-level function or value wherever its name stands alone (not after a `.`, not an
argument label); an extension's member where it is written qualified (`PushOutcome.apns`), or, for
a nested type, by its own name; a member added to another module's type (`String.trimmingSuffix`)
wherever `.trimmingSuffix` appears. A name that two rooms declare counts for neither.

Usage:
  scripts/rooms.py                      print the table and the count of mutually dependent pairs
  scripts/rooms.py --check FILE         compare with the table between the markers in FILE;
                                        exit 1 with a diff when they differ
  scripts/rooms.py --write FILE         replace the table between the markers in FILE
  --root DIR                            the module's folder (default Sources/PushRelay)
The markers are the lines `<!-- rooms:begin -->` and `<!-- rooms:end -->`.
"""
import argparse
import difflib
import os
import re
import sys
from collections import defaultdict

BEGIN = "<!-- rooms:begin -->"
END = "<!-- rooms:end -->"
TYPE_KEYWORDS = {"struct", "class", "enum", "actor", "protocol", "typealias"}
VALUE_KEYWORDS = {"func", "let", "var"}
HIDDEN = {"private", "fileprivate"}


def strip(source):
    """The source with comments and string literals blanked (newlines kept), interpolations kept."""
    out = []
    i = code(source, 0, out, interpolation=False)
    assert i >= len(source)
    return "".join(out)


def code(s, i, out, interpolation):
    """Copies code from i; in an interpolation, up to its closing parenthesis. Returns the index after."""
    depth = 0
    n = len(s)
    while i < n:
        c = s[i]
        if s.startswith("//", i):
            j = s.find("\n", i)
            i = n if j < 0 else j
        elif s.startswith("/*", i):
            i = block_comment(s, i, out)
        elif c == '"' or (c == "#" and re.match(r'#+"', s[i:])):
            i = string(s, i, out)
        elif c == "(":
            depth += 1
            out.append(c)
            i += 1
        elif c == ")":
            if interpolation and depth == 0:
                return i + 1
            depth -= 1
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return i


def block_comment(s, i, out):
    depth = 0
    while i < len(s):
        if s.startswith("/*", i):
            depth += 1
            i += 2
        elif s.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                break
        else:
            if s[i] == "\n":
                out.append("\n")
            i += 1
    out.append(" ")
    return i


def string(s, i, out):
    hashes = len(re.match(r"#*", s[i:]).group(0))
    i += hashes
    triple = s.startswith('"""', i)
    quote = '"""' if triple else '"'
    i += len(quote)
    close = quote + "#" * hashes
    escape = "\\" + "#" * hashes
    out.append(" ")
    while i < len(s):
        if s.startswith(close, i):
            return i + len(close)
        if s.startswith(escape, i):
            i += len(escape)
            if i < len(s) and s[i] == "(":
                out.append(" ")
                i = code(s, i + 1, out, interpolation=True)
                out.append(" ")
            else:
                i += 1
            continue
        if s[i] == "\n":
            out.append("\n")
        i += 1
    return i


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`[^`]+`|[{}().:,<>]|\S")


def declarations(text):
    """(kind, name, extended type or None, hidden) for top-level and extension-member declarations."""
    found = []
    tokens = [t.strip("`") for t in TOKEN.findall(text)]
    depth = 0
    extended = None  # the type of the top-level extension being read
    for k, token in enumerate(tokens):
        if token == "{":
            depth += 1
            continue
        if token == "}":
            depth -= 1
            if depth == 0:
                extended = None
            continue
        if depth == 0 and token == "extension" and k + 1 < len(tokens):
            name, j = tokens[k + 1], k + 2
            while j + 1 < len(tokens) and tokens[j] == ".":
                name += "." + tokens[j + 1]
                j += 2
            extended = name
            continue
        if token not in TYPE_KEYWORDS | VALUE_KEYWORDS or k + 1 >= len(tokens):
            continue
        if not (depth == 0 or (depth == 1 and extended)):
            continue
        name = tokens[k + 1]
        if not re.match(r"[A-Za-z_]\w*$", name):
            continue  # `class func`, `let (a, b)`, an operator
        if token == "class" and name in TYPE_KEYWORDS | VALUE_KEYWORDS:
            continue
        # Modifiers back to the previous declaration's end.
        hidden = False
        j = k - 1
        while j >= 0 and tokens[j] not in ("{", "}", ";") and k - j < 12:
            if tokens[j] in HIDDEN:
                hidden = True
            j -= 1
        kind = "type" if token in TYPE_KEYWORDS else ("func" if token == "func" else "value")
        found.append((kind, name, extended if depth == 1 else None, hidden))
    return found


def scan(root):
    rooms = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    texts = {}
    declared = {}
    for room in rooms:
        parts = []
        for folder, subfolders, files in os.walk(os.path.join(root, room)):
            subfolders.sort()
            for name in sorted(files):
                if name.endswith(".swift"):
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        parts.append(strip(f.read()))
        texts[room] = "\n".join(parts)
        declared[room] = [d for d in declarations(texts[room]) if not d[3]]

    owners = defaultdict(set)  # name (or Type.member) -> rooms
    for room in rooms:
        for kind, name, extended, _ in declared[room]:
            owners[f"{extended}.{name}" if extended else name].add(room)
            if extended and kind == "type":
                owners[name].add(room)
    module_types = {name for room in rooms for kind, name, extended, _ in declared[room] if kind == "type" and not extended}
    members = defaultdict(set)  # members of extensions on other modules' types (String, UUID) -> rooms
    for room in rooms:
        for kind, name, extended, _ in declared[room]:
            if extended and extended.split(".")[0] not in module_types:
                members[name].add(room)

    uses = {}
    for room in rooms:
        text = texts[room]
        used = set()
        for match in re.finditer(r"(\.\s*)?\b([A-Za-z_]\w*)\b(\s*:(?!:))?", text):
            dotted, name, label = match.groups()
            rooms_of = owners.get(name)
            if not rooms_of or len(rooms_of) != 1:
                continue
            owner = next(iter(rooms_of))
            if owner == room:
                continue
            if name[0].islower() and (dotted or label):
                continue
            used.add(owner)
        for qualified, rooms_of in owners.items():
            if "." in qualified and len(rooms_of) == 1:
                owner = next(iter(rooms_of))
                if owner != room and re.search(r"\b" + re.escape(qualified).replace(r"\.", r"\s*\.\s*") + r"\b", text):
                    used.add(owner)
        for name, rooms_of in members.items():
            owner = next(iter(rooms_of))
            if len(rooms_of) == 1 and owner != room and re.search(r"\.\s*" + re.escape(name) + r"\b", text):
                used.add(owner)
        uses[room] = used
    return rooms, declared, uses, module_types


def table(root):
    rooms, declared, uses, module_types = scan(root)
    lines = ["| room | owns | uses |", "|---|---|---|"]
    for room in rooms:
        types = sorted({n for k, n, e, _ in declared[room] if k == "type" and not e})
        nested = sorted({f"{e}.{n}" for k, n, e, _ in declared[room] if e and (k == "type" or e.split(".")[0] not in module_types)})
        funcs = sorted({n + "()" for k, n, e, _ in declared[room] if k == "func" and not e})
        values = sorted({n for k, n, e, _ in declared[room] if k == "value" and not e})
        owns = ", ".join(f"`{n}`" for n in types + nested + funcs + values) or "–"
        used = ", ".join(f"`{r}`" for r in sorted(uses[room])) or "–"
        lines.append(f"| `{room}/` | {owns} | {used} |")
    pairs = sorted({tuple(sorted((a, b))) for a in rooms for b in uses[a] if a in uses[b]})
    lines.append("")
    listed = ", ".join(f"`{a}` ↔ `{b}`" for a, b in pairs)
    lines.append(f"Mutually dependent pairs: {len(pairs)}" + (f" ({listed})." if pairs else "."))
    return "\n".join(lines) + "\n"


def split(document, path):
    start = document.find(BEGIN + "\n")
    end = document.find(END, start + 1)
    if start < 0 or end < 0:
        sys.exit(f"rooms.py: {path} has no {BEGIN} … {END} block")
    start += len(BEGIN) + 1
    return document[:start], document[start:end], document[end:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=os.path.join(repository, "Sources", "PushRelay"))
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", metavar="FILE")
    group.add_argument("--write", metavar="FILE")
    arguments = parser.parse_args()
    generated = table(arguments.root)
    path = arguments.check or arguments.write
    if not path:
        sys.stdout.write(generated)
        return 0
    with open(path, encoding="utf-8") as f:
        document = f.read()
    before, current, after = split(document, path)
    if arguments.write:
        if current != generated:
            with open(path, "w", encoding="utf-8") as f:
                f.write(before + generated + after)
        return 0
    if current == generated:
        return 0
    sys.stderr.write(f"rooms.py: the room table in {path} is not the one the sources give "
                     f"(scripts/rooms.py --write {path} updates it):\n")
    sys.stderr.writelines(difflib.unified_diff(current.splitlines(True), generated.splitlines(True),
                                               f"{path} (now)", "from the sources"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
