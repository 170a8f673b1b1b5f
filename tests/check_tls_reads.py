#!/usr/bin/env python3
"""Fails when the library reads a thread_local through a TLS init check.

An `extern thread_local` declaration hides its initializer, so every read
first tests a weak TLS init function (_ZTH...) for a dynamic initializer:
a load from the GOT each time, one more cache line on the launch and
allocation paths after the driver evicted ours. The hot thread-locals
(context_registry.hpp, thread_slot.hpp, tags.hpp) are inline with their
constant initializers in sight, so the library holds no weak, undefined
_ZTH reference. Usage:
    check_tls_reads.py NM LIBRARY
"""
import subprocess
import sys


def main():
    nm, lib = sys.argv[1:3]
    out = subprocess.run([nm, lib], check=True, capture_output=True, text=True).stdout
    checked = [line.split()[-1] for line in out.splitlines()
               if line.split()[-2:-1] == ["w"] and line.split()[-1].startswith("_ZTH")]
    if checked:
        print(f"{len(checked)} thread_local(s) read through a TLS init check "
              "(declare them inline with a constant initializer):")
        for name in checked:
            print("  ", name)
        return 1
    print("no thread_local is read through a TLS init check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
