"""Contexts, memory, the ledger, red zones, counters and the pool through
the ctypes package, on the test backend (host in CI)."""
import os
import unittest

from support import BACKEND

import metrale
from metrale import errors


def poke(ctx, ptr, data):
    """A stray store at a device address, as a buggy kernel makes: a copy
    with checked pointers off, which neither backend bounds by allocation."""
    ctx.copy_from_host(data, ptr)


class ContextTest(unittest.TestCase):
    def setUp(self):
        self.ctx = metrale.Context(backend=BACKEND, redzone_bytes=64)

    def tearDown(self):
        self.ctx.close()

    def test_backend_and_version(self):
        self.assertEqual(self.ctx.backend, BACKEND)
        self.assertEqual(len(metrale.version()), 3)

    def test_alloc_copy_free(self):
        p = self.ctx.alloc(256)
        self.assertNotEqual(p, 0)
        self.ctx.copy_from_host(bytes(range(256)), p)
        self.assertEqual(self.ctx.copy_to_host(p, 256), bytes(range(256)))
        self.assertEqual(self.ctx.live_count(), 1)
        self.assertEqual(self.ctx.live_bytes(), 256)
        self.ctx.free(p)
        self.assertEqual(self.ctx.live_count(), 0)

    def test_errors_carry_status_and_message(self):
        p = self.ctx.alloc(64)
        self.ctx.free(p)
        with self.assertRaises(metrale.MetraleError) as cm:
            self.ctx.free(p)
        self.assertEqual(cm.exception.status, errors.NOT_FOUND)
        self.assertEqual(cm.exception.name, "METRALE_ERROR_NOT_FOUND")
        self.assertIn("not a live allocation", cm.exception.message)
        with self.assertRaises(metrale.MetraleError) as cm:
            self.ctx.alloc(0)
        self.assertEqual(cm.exception.status, errors.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            metrale.Context(backend=BACKEND, no_such_option=1)

    def test_closed_context_is_refused(self):
        ctx = metrale.Context(backend=BACKEND)
        ctx.close()
        ctx.close()  # twice is fine
        with self.assertRaises(metrale.MetraleError):
            ctx.alloc(16)

    def test_live_list_with_sites_and_tags(self):
        with metrale.tag("loader"):
            a = self.ctx.alloc(100, site=("data.py", 7))
        b = self.ctx.alloc(200)
        live = self.ctx.live_allocations()
        self.assertEqual([x["ptr"] for x in live], [a, b])
        self.assertEqual((live[0]["file"], live[0]["line"]), ("data.py", 7))
        self.assertEqual(live[0]["tag"], "loader")
        self.assertIsNone(live[1]["tag"])
        self.assertEqual(live[0]["redzone_bytes"], 64)
        self.assertEqual(self.ctx.allocation_tag(a), "loader")
        self.ctx.free(a)
        self.ctx.free(b)
        with self.assertRaises(metrale.MetraleError):
            self.ctx.allocation_tag(a)
        self.assertIsNone(self.ctx.allocation_tag(a, missing=None))

    def test_reports(self):
        with metrale.tag("big"):
            a = self.ctx.alloc(3 << 20, site=("model.py", 10))
        b = self.ctx.alloc(1000, site=("model.py", 20))
        by_site = self.ctx.report()
        self.assertIn("model.py:10", by_site)
        self.assertLess(by_site.index("model.py:10"), by_site.index("model.py:20"))
        by_tag = self.ctx.report_by_tag()
        self.assertIn("1 allocation tagged big", by_tag)
        self.assertIn("1 allocation untagged", by_tag)
        self.assertIn("total:", by_tag)
        self.assertNotIn("untagged", self.ctx.report_by_tag(top_n=1))
        self.ctx.free(a)
        self.ctx.free(b)

    def test_scan_catches_overflow_and_names_tag_and_site(self):
        with metrale.tag("layer2"):
            p = self.ctx.alloc(128, site=("kernel.py", 33))
        q = self.ctx.alloc(128)
        self.assertEqual(self.ctx.scan(), [])
        poke(self.ctx, p + 128, b"\x00\x01")  # two bytes past the end
        found = self.ctx.scan()
        self.assertEqual(len(found), 1)
        v = found[0]
        self.assertEqual(v["ptr"], p)
        self.assertEqual((v["file"], v["line"], v["tag"]), ("kernel.py", 33, "layer2"))
        self.assertEqual(v["first_bad_offset"], 0)
        self.assertEqual(v["bad_bytes"], 2)
        self.assertIn("tag layer2", v["message"])
        self.ctx.poison()
        self.assertEqual(self.ctx.scan(), [])
        self.ctx.free(p)
        self.ctx.free(q)

    def test_counters_and_pool(self):
        self.ctx.reset_counters()
        p = self.ctx.alloc(4096)
        self.ctx.free(p)
        c = self.ctx.counters()
        self.assertEqual((c["allocs"], c["frees"]), (1, 1))
        self.assertEqual(c["alloc_bytes"], 4096)
        s = self.ctx.pool_stats()
        if os.environ.get("METRALE_POOL") == "0":  # the environment overrides the default
            self.assertEqual((s["enabled"], s["reserved_bytes"]), (0, 0))
        else:
            self.assertEqual(s["enabled"], 1)
            self.assertGreaterEqual(s["reserved_bytes"], 4096)
            self.assertGreaterEqual(s["peak_in_use_bytes"], 4096)
        self.assertGreaterEqual(self.ctx.pool_trim(0), 0)

    def test_sweep(self):
        self.ctx.alloc(10)
        self.ctx.alloc(20)
        self.assertEqual(self.ctx.sweep(), 2)
        self.assertEqual(self.ctx.live_count(), 0)

    def test_streams(self):
        s = self.ctx.create_stream()
        p = self.ctx.alloc(512, stream=s)
        self.ctx.free(p, stream=s)
        self.ctx.synchronize(s)
        self.ctx.destroy_stream(s)
        w = self.ctx.wrap_stream(0)
        self.assertEqual(self.ctx.wrap_stream(0), w)
        self.ctx.destroy_stream(w)
        self.ctx.destroy_stream(w)
        with self.assertRaises(metrale.MetraleError):
            self.ctx.destroy_stream(w)


if __name__ == "__main__":
    unittest.main()
