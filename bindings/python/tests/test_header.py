"""The ctypes structs match include/metrale_gpu.h field by field (names and
order), so a field added to the header fails here instead of shifting
memory under the package."""
import os
import re
import unittest

from support import HERE

from metrale import _types as T

HEADER = os.path.join(HERE, "..", "..", "..", "include", "metrale_gpu.h")


def header_fields(struct):
    text = open(HEADER, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    m = re.search(r"typedef struct %s \{(.*?)\}" % struct, text, flags=re.S)
    assert m, struct
    names = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        # "uint64_t a, b" declares two; "const char* file" one.
        head, *rest = decl.split(",")
        names.append(re.findall(r"(\w+)\s*(?:\[[^\]]*\])?$", head.strip())[0])
        names += [r.strip() for r in rest]
    return names


class HeaderTest(unittest.TestCase):
    def test_structs_match(self):
        for struct, cls in [
            ("metrale_context_options", T.ContextOptions),
            ("metrale_allocation", T.Allocation),
            ("metrale_redzone_violation", T.RedzoneViolation),
            ("metrale_use_after_free", T.UseAfterFree),
            ("metrale_counters", T.Counters),
            ("metrale_pool_stats", T.PoolStats),
        ]:
            with self.subTest(struct=struct):
                self.assertEqual([n for n, _ in cls._fields_], header_fields(struct))


if __name__ == "__main__":
    unittest.main()
