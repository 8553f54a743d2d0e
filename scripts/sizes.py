#!/usr/bin/env python3
"""The sizes docs/architecture.md holds the main module to: functions, types and lines.

For each Swift file under the root (default Sources/PushRelay) it finds, in the source with comments
and string literals blanked (scripts/rooms.py's reader), every function, initialiser and
subscript with a body, and every type and extension. A function's lines run from its `func` (or
`init`, `subscript`) line to its closing brace; a type's from its keyword to its closing brace,
nested types included, and a type counts the lines of all its extensions in any file
(`extension Dispatcher` adds to `Dispatcher`, `extension Dispatcher.StateMachine` to the nested
type). Lines over 120 and 150 columns are counted in the files as written.

Usage:
  scripts/sizes.py                 print the functions over 50 lines, types over 400 and line counts
  scripts/sizes.py --check         exit 1 when a function is over 80 lines, a type over 600, a line
                                   over 150 columns, or more than 2 % of lines over 120
  --root DIR                       the folder to measure (default Sources/PushRelay)
"""
import argparse
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rooms import strip  # noqa: E402

FUNCTION_LIMIT, TYPE_LIMIT, LONG, TOO_LONG, LONG_SHARE = 80, 600, 120, 150, 0.02
DECLARATION = re.compile(
    r"\b(?:(func)\s+([^\s(<]+)|(init)[?!]?\s*[(<]|(subscript)\s*[(<]"
    r"|(struct|class|enum|actor|protocol|extension)\s+([A-Za-z_][A-Za-z0-9_.]*))"
)


def closing_brace(text, start):
    """The index of the `}` that closes the `{` at start."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def body_start(text, start):
    """The `{` that opens the body of the declaration at start, or None (a protocol requirement).

    Brackets of the signature are skipped, so a default argument's closure is not taken for the
    body; at the signature's depth, a new line that does not continue it (`->`, `where`, `throws`,
    `async`, `{`) ends a declaration without a body."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([<":
            depth += 1
        elif c in ")]>" and not text.startswith("->", i - 1):
            depth -= 1
        elif depth <= 0 and c == "{":
            return i
        elif depth <= 0 and c in "};=":
            return None
        elif depth <= 0 and c == "\n":
            following = text[i:].lstrip()
            if not re.match(r"(->|where\b|throws\b|async\b|rethrows\b|\{)", following):
                return None
    return None


def measure(root):
    functions, types = [], defaultdict(int)
    lines_total, over_long, over_too_long = 0, [], []
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            for number, line in enumerate(source.split("\n"), 1):
                lines_total += 1
                if len(line) > LONG:
                    over_long.append((path, number))
                if len(line) > TOO_LONG:
                    over_too_long.append((path, number))
            text = strip(source)
            line_of = lambda index: text.count("\n", 0, index) + 1  # noqa: E731
            scopes = []  # (closing index, type name) of the types around the current position
            for match in DECLARATION.finditer(text):
                while scopes and scopes[-1][0] < match.start():
                    scopes.pop()
                opening = body_start(text, match.end())
                if opening is None:
                    continue
                closing = closing_brace(text, opening)
                span = line_of(closing) - line_of(match.start()) + 1
                kind = match.group(1) or match.group(3) or match.group(4) or match.group(5)
                if kind in ("func", "init", "subscript"):
                    label = match.group(2) or kind
                    owner = scopes[-1][1] if scopes else ""
                    functions.append((span, f"{owner}.{label}" if owner else label, path, line_of(match.start())))
                    continue
                declared = match.group(6)
                if kind == "extension":
                    full = declared
                else:
                    full = f"{scopes[-1][1]}.{declared}" if scopes else declared
                if kind != "protocol":
                    types[full] += span
                scopes.append((closing, full))
    return functions, types, lines_total, over_long, over_too_long


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="Sources/PushRelay")
    parser.add_argument("--check", action="store_true")
    arguments = parser.parse_args()
    functions, types, total, long_lines, too_long = measure(arguments.root)
    shown_function = FUNCTION_LIMIT if arguments.check else 50
    shown_type = TYPE_LIMIT if arguments.check else 400
    failures = 0
    for span, name, path, line in sorted(functions, reverse=True):
        if span > shown_function:
            print(f"function {span:4d} lines  {name}  {path}:{line}")
            failures += span > FUNCTION_LIMIT
    for name, span in sorted(types.items(), key=lambda item: -item[1]):
        if span > shown_type:
            print(f"type     {span:4d} lines  {name} (with its extensions)")
            failures += span > TYPE_LIMIT
    for path, line in too_long:
        print(f"line over {TOO_LONG} columns  {path}:{line}")
    failures += len(too_long)
    share = len(long_lines) / max(total, 1)
    print(f"{total} lines; {len(long_lines)} over {LONG} columns ({share:.1%}), {len(too_long)} over {TOO_LONG}")
    failures += share > LONG_SHARE
    over = sum(span > FUNCTION_LIMIT for span, *_ in functions)
    print(f"{len(functions)} functions, {over} over {FUNCTION_LIMIT} lines; {sum(span > TYPE_LIMIT for span in types.values())} types over {TYPE_LIMIT}")
    if arguments.check and failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
