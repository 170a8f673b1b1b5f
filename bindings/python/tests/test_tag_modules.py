"""metrale.tag_modules' hook logic without PyTorch: a stand-in module tree
with PyTorch's hook-registration methods runs forward and backward the way
nn.Module._call_impl and autograd do, and each allocation must carry its
module's qualified name; an unbalanced backward (a skipped post-hook) must
not leave a stale tag."""
import unittest

from support import BACKEND

import metrale


class Handle:
    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        self.hooks.remove(self.fn)


class FakeModule:
    def __init__(self, **children):
        self._children = children
        self.pre, self.post, self.bpre, self.bpost = [], [], [], []

    def children(self):
        return iter(self._children.values())

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def _reg(self, hooks, fn):
        hooks.append(fn)
        return Handle(hooks, fn)

    def register_forward_pre_hook(self, fn):
        return self._reg(self.pre, fn)

    def register_forward_hook(self, fn):
        return self._reg(self.post, fn)

    def register_full_backward_pre_hook(self, fn):
        return self._reg(self.bpre, fn)

    def register_full_backward_hook(self, fn):
        return self._reg(self.bpost, fn)

    def __call__(self, body):
        for h in self.pre:
            h(self, ())
        out = body(self)
        for h in self.post:
            h(self, (), out)
        return out

    def backward(self, body, skip_post=False):
        for h in self.bpre:
            h(self, ())
        body()
        if not skip_post:
            for h in self.bpost:
                h(self, (), ())


class TagModulesTest(unittest.TestCase):
    def test_forward_and_backward_tags(self):
        enc, head = FakeModule(), FakeModule()
        model = FakeModule(enc=enc, head=head)
        handles = metrale.tag_modules(model, prefix="net", backward=True)
        self.assertEqual(len(handles), 3 * 2 + 2 * 2)  # backward hooks on the 2 leaves only
        with metrale.Context(backend=BACKEND) as ctx:
            got = {}

            def run(m):
                got["enc"] = enc(lambda _: ctx.alloc(64))
                got["head"] = head(lambda _: ctx.alloc(64))
                got["root"] = ctx.alloc(64)

            model(run)
            self.assertIsNone(metrale.current_tag())
            enc.backward(lambda: got.__setitem__("enc_bw", ctx.alloc(64)), skip_post=True)
            head.backward(lambda: got.__setitem__("head_bw", ctx.alloc(64)))
            self.assertIsNone(metrale.current_tag())  # the skipped post-hook left nothing
            tags = {k: ctx.allocation_tag(p) for k, p in got.items()}
            self.assertEqual(tags, {"enc": "net.enc", "head": "net.head", "root": "net",
                                    "enc_bw": "net.enc.backward",
                                    "head_bw": "net.head.backward"})
            for h in handles:
                h.remove()
            p = enc(lambda _: ctx.alloc(64))
            self.assertIsNone(ctx.allocation_tag(p))  # hooks removed
            ctx.sweep()

    def test_reset_after_a_forward_that_raised(self):
        model = FakeModule()
        metrale.tag_modules(model, prefix="m")

        def boom(_):
            raise ValueError("forward failed")

        with self.assertRaises(ValueError):
            model(boom)
        self.assertEqual(metrale.current_tag(), "m")  # its post-hook never ran
        metrale.reset_hook_tags()
        self.assertIsNone(metrale.current_tag())


if __name__ == "__main__":
    unittest.main()
