#!/usr/bin/env python3
"""Checks the module table of docs/ARCHITECTURE.md against the code.

Reads the rows of the tables under "## Modules and what each may depend on": the first cell
names one or more folders (`lang/`, `tests/lang/`), the last one what they may include, as
backticked tokens: a folder (`lang`), one file (`schedule/LoweredFunc.h`), or `kiln` (the library:
the five modules `lang`, `schedule`, `codegen`, `driver`, `runtime`, and the umbrella `kiln.h`).
Text in parentheses is commentary and is not read. A folder may always include itself.

Then, for every tracked .h/.cpp/.c/.def file in a listed folder, every `#include "..."` that
names a folder of the tree (or kiln.h) must be allowed by the row of the file's folder (the
longest listed prefix). Also: no header outside tests/ includes the umbrella kiln.h, and each
`kiln_module(<name> DEPS ...)` in CMake links the modules its row allows it to use.

Prints `file:line: forbidden include "x" (folder -> x; see docs/ARCHITECTURE.md)` for each
violation and exits 1 when there is any. Python 3, standard library only.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
SECTION = "## Modules and what each may depend on"
LIBRARY = ["lang", "schedule", "codegen", "driver", "runtime"]
SOURCE = re.compile(r"\.(h|cpp|c|def)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def strip_parentheses(text):
    """Removes parenthesized commentary, nested or not."""
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def read_table():
    """Returns {folder: set of allowed tokens}, folders without a trailing slash."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    start = text.find(SECTION)
    if start < 0:
        sys.exit(f"check-includes: no section '{SECTION}' in {DOC}")
    end = text.find("\n## ", start + len(SECTION))
    rules = {}
    for line in text[start:end if end >= 0 else None].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or len(cells) < 2:
            continue
        folders = re.findall(r"`([\w/]+)/`", cells[0])
        if not folders:
            continue
        allowed = set(re.findall(r"`([\w./]+)`", strip_parentheses(cells[-1])))
        for folder in folders:
            rules[folder] = allowed
    if not rules:
        sys.exit(f"check-includes: no table rows read from {DOC}")
    return rules


def permits(allowed, folder, target):
    """Whether a file of `folder` may include `target` (a path like lang/IR.h, or kiln.h)."""
    if target == "kiln.h":
        return "kiln" in allowed
    if target.startswith(folder + "/"):
        return True
    top = target.split("/")[0]
    for token in allowed:
        if token == "kiln" and top in LIBRARY:
            return True
        if token == target or target.startswith(token + "/"):
            return True
    return False


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [p for p in out.splitlines() if SOURCE.search(p)]


def main():
    rules = read_table()
    top_folders = {p for p in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, p))}
    errors = []
    for path in tracked_files():
        folder = max((f for f in rules if path.startswith(f + "/")), key=len, default=None)
        if folder is None:
            continue
        allowed = rules[folder]
        full = os.path.join(ROOT, path)
        if not os.path.exists(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            # Includes relative to the file itself (generated headers, helpers next to it).
            if os.path.exists(os.path.join(os.path.dirname(full), target)) and target != "kiln.h":
                continue
            if target != "kiln.h" and target.split("/")[0] not in top_folders:
                continue
            if target == "kiln.h" and path.endswith(".h") and not path.startswith("tests/"):
                errors.append(f"{path}:{number}: a library header includes the umbrella kiln.h; "
                              "include the headers it needs")
                continue
            if not permits(allowed, folder, target):
                arrow = "kiln.h" if target == "kiln.h" else target.split("/")[0]
                errors.append(f'{path}:{number}: forbidden include "{target}" ({folder} -> '
                              f"{arrow}; see the module table in docs/ARCHITECTURE.md)")
    # Each module library links what its row lets it use.
    for folder in LIBRARY + ["autotune"]:
        cmake = os.path.join(ROOT, folder, "CMakeLists.txt")
        if not os.path.exists(cmake) or folder not in rules:
            continue
        with open(cmake, encoding="utf-8") as f:
            m = re.search(r"kiln_module\(\s*(\w+)([^)]*)\)", f.read())
        if not m:
            continue
        deps = m.group(2).split()
        linked = set()
        for d in deps:
            if d == "kiln":
                linked.update(LIBRARY)
            elif d.startswith("kiln_"):
                linked.add(d[len("kiln_"):])
        for token in rules[folder]:
            module = "kiln" if token == "kiln" else token.split("/")[0]
            needed = LIBRARY if module == "kiln" else [module]
            for n in needed:
                if n != folder and n not in linked and os.path.isdir(os.path.join(ROOT, n)):
                    errors.append(f"{folder}/CMakeLists.txt: kiln_{m.group(1)} may use {n} "
                                  f"(docs/ARCHITECTURE.md) but does not link kiln_{n}")
    for e in errors:
        print(e)
    if errors:
        print(f"check-includes: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"check-includes: {len(rules)} folders, no forbidden include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
