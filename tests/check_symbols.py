#!/usr/bin/env python3
"""Checks the shared library's dynamic symbol table against the header.

Fails when a defined dynamic symbol lacks the metrale_ prefix, and when a
function declared in the header is not exported. Usage:
    check_symbols.py NM LIBRARY HEADER
"""
import re
import subprocess
import sys


def header_functions(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    # Drop preprocessor lines with their continuations: macros are not symbols.
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    # "metrale_status_t (*fn)(...)" is a function-pointer typedef, not a call.
    return set(re.findall(r"\b(metrale_[a-z0-9_]+)\s*\((?!\s*\*)", text))


def exported_symbols(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, name = parts[-2], parts[-1]
        symbols[name.split("@")[0]] = kind
    return symbols


def main():
    nm, lib, header = sys.argv[1:4]
    with open(header, encoding="utf-8") as f:
        wanted = header_functions(f.read())
    symbols = exported_symbols(nm, lib)
    # Absolute symbols ('A') are version-node names from the linker script,
    # not code or data.
    foreign = sorted(n for n, k in symbols.items() if k != "A" and not n.startswith("metrale_"))
    missing = sorted(wanted - set(symbols))
    ok = True
    if not wanted:
        print("no function declarations found in", header)
        ok = False
    if foreign:
        print(f"{len(foreign)} exported symbol(s) without the metrale_ prefix:")
        for n in foreign[:50]:
            print("  ", n)
        ok = False
    if missing:
        print(f"{len(missing)} header function(s) missing from the dynamic symbol table:")
        for n in missing:
            print("  ", n)
        ok = False
    print(f"{len(wanted)} header functions, {len(symbols)} exported symbols")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
