#!/usr/bin/env python3
"""Makes libmetrale_gpu.a from the partially linked archive (meson.build).

Usage: localize_archive.py OBJCOPY AR PRELINKED.a OUT.a

PRELINKED.a holds one object: every object of the shared library, linked
with `c++ -r`. Meson writes it as a thin archive (member paths relative to
the archive's folder), which objcopy cannot copy, so the member is read
directly (or extracted, from a regular archive). `objcopy --localize-hidden`
then makes every hidden symbol local: the objects are compiled with
-fvisibility=hidden and only the metrale_* API is marked default, so what a
consumer links against is the API and nothing of the library's internals.
objcopy leaves GNU_UNIQUE symbols alone (function-local statics of inline
functions, e.g. metrale::core::human_bytes's table, fmt's digit tables):
those that are hidden are first rebound as WEAK (unique binding means
nothing for a hidden symbol), so that objcopy localizes them too.
The result is written as a regular, deterministic archive (`ar rcsD`).
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

STB_WEAK, STB_GNU_UNIQUE = 2, 10
STV_INTERNAL, STV_HIDDEN = 1, 2


def weaken_hidden_unique(path):
    """Rebinds hidden GNU_UNIQUE symbols of an ELF64 little-endian object as WEAK; returns how many."""
    with open(path, "r+b") as f:
        elf = bytearray(f.read())
        if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
            sys.exit(f"localize_archive: {path} is not a little-endian ELF64 object")
        shoff, = struct.unpack_from("<Q", elf, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
        changed = 0
        for i in range(shnum):
            sh = shoff + i * shentsize
            sh_type, = struct.unpack_from("<I", elf, sh + 4)
            if sh_type != 2:  # SHT_SYMTAB
                continue
            offset, size = struct.unpack_from("<QQ", elf, sh + 0x18)
            entsize, = struct.unpack_from("<Q", elf, sh + 0x38)
            for sym in range(offset, offset + size, entsize):
                info, other = elf[sym + 4], elf[sym + 5]
                if info >> 4 == STB_GNU_UNIQUE and other & 3 in (STV_INTERNAL, STV_HIDDEN):
                    elf[sym + 4] = (STB_WEAK << 4) | (info & 0xF)
                    changed += 1
        f.seek(0)
        f.write(elf)
    return changed


def main():
    objcopy, ar, prelinked, out = sys.argv[1:5]
    members = subprocess.run([ar, "t", prelinked], check=True, capture_output=True,
                             text=True).stdout.split()
    if len(members) != 1:
        sys.exit(f"localize_archive: {prelinked} holds {len(members)} members, expected the one partially linked object")
    with open(prelinked, "rb") as f:
        thin = f.read(8) == b"!<thin>\n"
    with tempfile.TemporaryDirectory() as tmp:
        if thin:
            member = os.path.join(os.path.dirname(os.path.abspath(prelinked)), members[0])
        else:
            subprocess.run([ar, "x", os.path.abspath(prelinked)], check=True, cwd=tmp)
            member = os.path.join(tmp, members[0])
        unlocalized = os.path.join(tmp, "prelinked.o")
        shutil.copyfile(member, unlocalized)
        weaken_hidden_unique(unlocalized)
        obj = os.path.join(tmp, "metrale_gpu.o")
        subprocess.run([objcopy, "--localize-hidden", unlocalized, obj], check=True)
        if os.path.exists(out):
            os.remove(out)  # ar r would add to the old archive
        subprocess.run([ar, "rcsD", out, obj], check=True)


if __name__ == "__main__":
    main()
