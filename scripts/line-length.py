#!/usr/bin/env python3
"""Refuses Swift lines longer than .swift-format's lineLength (150 columns, counted in characters).

swift-format wraps code but leaves string literals and comments as written, so a long one passes
its lint; scripts/test.sh runs this beside it. Usage: scripts/line-length.py [DIR ...]
(default Sources Plugins Clients). Exit 1 listing file:line: columns for each longer line.
"""
import json
import os
import sys

limit = json.load(open(".swift-format"))["lineLength"]
long = []
for top in sys.argv[1:] or ["Sources", "Plugins", "Clients"]:
    for root, _, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".swift"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as source:
                    for number, line in enumerate(source, 1):
                        if len(line.rstrip("\n")) > limit:
                            long.append(f"{path}:{number}: {len(line.rstrip())} columns")
if long:
    print(f"line-length.py: {len(long)} lines over {limit} columns:", *long, sep="\n", file=sys.stderr)
    sys.exit(1)
