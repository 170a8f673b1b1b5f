#!/usr/bin/env python3
"""Checks libmetrale_gpu.a's global symbols: what a static consumer links.

The archive is the shared library's objects, partially linked into one and
with every hidden symbol made local (meson.build). This fails when
- a header function is not defined there as a global symbol;
- a strong global definition lacks the metrale_ prefix (a consumer defining
  the same name would get "multiple definition");
- any global definition, weak ones included, is in namespace metrale:: (the
  library's internals: a consumer's own definition could replace them);
- the archive holds more than one member (the partial link did not happen,
  so a consumer could pull some members and not others).
Weak definitions of other namespaces (std:: and spdlog/fmt template code
that their headers give default visibility) stay: the linker merges them
with the consumer's copies of the same code, as for any C++ library.
Usage: check_static_archive.py NM AR CXXFILT ARCHIVE HEADER
"""
import subprocess
import sys

from check_symbols import header_functions

STRONG = set("TDBRGSCIi")  # defined, not weak (W/V/w/v), not undefined (U)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main():
    nm, ar, cxxfilt, archive, header = sys.argv[1:6]
    with open(header, encoding="utf-8") as f:
        wanted = header_functions(f.read())
    members = run(ar, "t", archive).split()
    symbols = {}
    for line in run(nm, "--defined-only", "--extern-only", archive).splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            symbols[parts[-1]] = parts[-2]
    names = list(symbols)
    demangled = dict(zip(names, run(cxxfilt, *names).splitlines())) if names else {}

    problems = []
    if len(members) != 1:
        problems.append(f"{len(members)} archive members, expected one partially linked object: {members[:10]}")
    missing = sorted(n for n in wanted if symbols.get(n) != "T")
    if missing:
        problems.append(f"{len(missing)} header function(s) not defined as global code: {missing[:20]}")
    foreign = sorted(n for n, k in symbols.items() if k in STRONG and not n.startswith("metrale_"))
    if foreign:
        problems.append(f"{len(foreign)} strong global symbol(s) without the metrale_ prefix: "
                        + ", ".join(f"{n} ({demangled[n]})" for n in foreign[:20]))
    internal = sorted(demangled[n] for n in symbols if demangled[n].startswith("metrale::"))
    if internal:
        problems.append(f"{len(internal)} global symbol(s) of namespace metrale::: {internal[:20]}")
    weak = sum(1 for k in symbols.values() if k not in STRONG)
    print(f"{archive}: {len(members)} member(s), {len(symbols)} global definitions "
          f"({len(symbols) - weak} strong, {weak} weak), {len(wanted)} header functions")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems or not wanted else 0


if __name__ == "__main__":
    sys.exit(main())
