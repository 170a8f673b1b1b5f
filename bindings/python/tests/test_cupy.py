"""CuPy on libmetrale_gpu (skipped, with the reason, without cupy or a GPU).
In a subprocess: the allocator is process-wide."""
import os
import subprocess
import sys
import textwrap
import unittest

from support import HERE, cupy_gpu_reason

REASON = cupy_gpu_reason()


@unittest.skipIf(REASON is not None, REASON)
class CupyTest(unittest.TestCase):
    def test_arrays_live_on_the_ledger(self):
        code = f"import sys; sys.path.insert(0, {os.path.dirname(HERE)!r})\n" + textwrap.dedent("""
            import metrale, cupy
            metrale.install_cupy_allocator(redzone_bytes=64)
            ctx = metrale.pluggable.device_context(cupy.cuda.runtime.getDevice())
            base = ctx.live_count()
            with metrale.tag("cupy-arrays"):
                a = cupy.arange(1 << 20, dtype=cupy.float32)
                b = (a * 2).sum()
            assert float(b) == float((1 << 20) * ((1 << 20) - 1)), float(b)
            assert "tagged cupy-arrays" in ctx.report_by_tag(), ctx.report_by_tag()
            assert ctx.allocation_tag(a.data.ptr) == "cupy-arrays"
            cupy.cuda.get_current_stream().synchronize()
            assert ctx.scan() == []
            del a, b
            import gc; gc.collect()
            cupy.cuda.get_current_stream().synchronize()
            assert ctx.live_count() == base, (ctx.live_count(), base)
            print("OK")
        """)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("OK", r.stdout)


if __name__ == "__main__":
    unittest.main()
