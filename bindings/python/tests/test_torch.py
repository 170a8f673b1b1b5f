"""PyTorch on libmetrale_gpu (H200 only: skipped, with the reason, where
torch or a GPU is missing). Each case runs in a subprocess: the allocator
can be changed only before PyTorch's first CUDA allocation."""
import os
import subprocess
import sys
import textwrap
import unittest

from support import HERE, torch_gpu_reason

REASON = torch_gpu_reason()

PRELUDE = f"""
import sys
sys.path.insert(0, {os.path.dirname(HERE)!r})
import metrale, torch
"""


def run(body):
    code = PRELUDE + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"subprocess failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


@unittest.skipIf(REASON is not None, REASON)
class TorchTest(unittest.TestCase):
    def test_training_steps_are_tagged_and_clean(self):
        out = run("""
            a = metrale.install_torch_allocator(redzone_bytes=64)
            model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                        torch.nn.Linear(512, 10)).cuda()
            metrale.tag_modules(model)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(5):
                x = torch.randn(64, 256, device="cuda")
                loss = model(x).square().mean()
                opt.zero_grad(); loss.backward(); opt.step()
            torch.cuda.synchronize()
            ctx = a.context(0)
            assert ctx.live_count() > 0
            rep = a.report_by_tag()
            assert "tagged Sequential.0" in rep, rep
            assert a.scan() == [], a.scan()
            # The pool is the default; METRALE_POOL=0 (the suite's pool-off
            # pass) turns it off for every context, this one included.
            import os
            want = 0 if os.environ.get("METRALE_POOL") == "0" else 1
            assert a.pool_stats()["enabled"] == want, (a.pool_stats(), want)
            print("OK", ctx.live_count())
        """)
        self.assertIn("OK", out)

    def test_write_past_a_tensor_is_caught_with_tag_and_site(self):
        out = run("""
            a = metrale.install_torch_allocator(redzone_bytes=64, python_sites=True)
            with metrale.tag("victim"):
                x = torch.zeros(1000, device="cuda")
            ctx = a.context(0)
            torch.cuda.synchronize()
            ctx.memset(x.data_ptr(), 7, x.nbytes + 4)  # 4 bytes past the end
            found = a.scan()
            assert len(found) == 1, found
            v = found[0]
            assert v["ptr"] == x.data_ptr() and v["tag"] == "victim", v
            assert v["file"].endswith(".py") or v["file"] == "<string>", v
            print("CAUGHT", v["tag"], v["file"], v["line"])
        """)
        self.assertIn("CAUGHT victim", out)


if __name__ == "__main__":
    unittest.main()
