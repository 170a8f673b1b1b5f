"""libmetrale_gpu_pluggable from Python: the per-device contexts the PyTorch
and CuPy allocators use, driven directly (no framework needed). The
library's state is process-wide: configure runs once per process, here."""
import os
import sys
import unittest

from support import BACKEND

import metrale
from metrale import pluggable


def setUpModule():
    try:
        pluggable.configure(backend=BACKEND, redzone_bytes=32, pool=1)
    except metrale.MetraleError as e:  # another module of this run used it first
        if "too late" not in e.message:
            raise


class PluggableTest(unittest.TestCase):
    def test_alloc_free_and_device_context(self):
        ctx = pluggable.device_context(0)
        before = ctx.live_count()
        with metrale.tag("batch"):
            p = pluggable.alloc(4096, 0, 0)
        self.assertNotEqual(p, 0)
        self.assertEqual(ctx.live_count(), before + 1)
        self.assertEqual(ctx.allocation_tag(p), "batch")
        self.assertIn("tagged batch", ctx.report_by_tag())
        pluggable.free(p, 4096, 0, 0)
        self.assertEqual(ctx.live_count(), before)
        ctx.close()  # borrowed: leaves the context alone
        self.assertEqual(pluggable.device_context(0).live_count(), before)

    def test_failures_return_zero_with_a_message(self):
        self.assertEqual(pluggable.alloc(0), 0)
        self.assertEqual(pluggable.alloc(-5), 0)
        self.assertIn("negative", pluggable.last_error())
        pluggable.free(0x10, 16, 0, 0)
        self.assertIn("not a live allocation", pluggable.last_error())
        with self.assertRaises(metrale.MetraleError) as cm:
            pluggable.configure()
        self.assertIn("too late", cm.exception.message)

    def test_python_frame_as_site(self):
        metrale.capture_python_sites(True)
        try:
            p = pluggable.alloc(128); line = sys._getframe().f_lineno  # noqa: E702
        finally:
            metrale.capture_python_sites(False)
        q = pluggable.alloc(128)
        live = {a["ptr"]: a for a in pluggable.device_context(0).live_allocations()}
        self.assertEqual(os.path.basename(live[p]["file"]), "test_pluggable.py")
        self.assertEqual(live[p]["line"], line)
        self.assertEqual(live[q]["file"], "<pluggable allocator>")
        pluggable.free(p)
        pluggable.free(q)

    def test_scan_through_the_device_context(self):
        with metrale.tag("conv1"):
            p = pluggable.alloc(100)
        ctx = pluggable.device_context(0)
        # The pad is filled on the allocation's stream (on cuda the legacy
        # stream): a scan waits for it, so the stray store lands after it.
        self.assertEqual(ctx.scan(), [])
        ctx.copy_from_host(b"\x00", p + 100)  # one byte past the end
        found = ctx.scan()
        self.assertEqual([(v["ptr"], v["tag"]) for v in found], [(p, "conv1")])
        ctx.poison()
        pluggable.free(p)


if __name__ == "__main__":
    unittest.main()
