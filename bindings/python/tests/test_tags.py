"""Tags from Python: the context manager, the decorator, push/pop, threads,
and Python frames as sites."""
import os
import sys
import threading
import unittest

from support import BACKEND

import metrale


class TagTest(unittest.TestCase):
    def test_nesting(self):
        self.assertIsNone(metrale.current_tag())
        with metrale.tag("outer"):
            self.assertEqual(metrale.current_tag(), "outer")
            with metrale.tag("inner"):
                self.assertEqual(metrale.current_tag(), "inner")
            self.assertEqual(metrale.current_tag(), "outer")
        self.assertIsNone(metrale.current_tag())

    def test_decorator_and_exceptions(self):
        @metrale.tag("step")
        def step():
            self.assertEqual(metrale.current_tag(), "step")
            raise ValueError("boom")

        with self.assertRaises(ValueError):
            step()
        self.assertIsNone(metrale.current_tag())  # popped on the way out

    def test_push_pop_and_refusals(self):
        metrale.push_tag("a")
        metrale.pop_tag()
        with self.assertRaises(metrale.MetraleError):
            metrale.pop_tag()
        with self.assertRaises(metrale.MetraleError):
            metrale.push_tag("")
        with self.assertRaises(metrale.MetraleError):
            metrale.push_tag("x" * 257)
        with self.assertRaises(TypeError):
            metrale.push_tag(42)
        self.assertIsNone(metrale.current_tag())

    def test_per_thread(self):
        seen = []
        with metrale.tag("main"):
            t = threading.Thread(target=lambda: seen.append(metrale.current_tag()))
            t.start()
            t.join()
        self.assertEqual(seen, [None])


class PythonSiteTest(unittest.TestCase):
    def test_frame_is_the_site_when_asked(self):
        with metrale.Context(backend=BACKEND) as ctx:
            metrale.capture_python_sites(True)
            try:
                p = ctx.alloc(64); line = sys._getframe().f_lineno  # noqa: E702
            finally:
                metrale.capture_python_sites(False)
            q = ctx.alloc(64)
            live = {a["ptr"]: a for a in ctx.live_allocations()}
            self.assertEqual(os.path.basename(live[p]["file"]), "test_tags.py")
            self.assertEqual(live[p]["line"], line)
            self.assertEqual(live[q]["file"], "<python>")  # off: no frame asked
            ctx.free(p)
            ctx.free(q)


if __name__ == "__main__":
    unittest.main()
