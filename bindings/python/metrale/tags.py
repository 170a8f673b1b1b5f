"""Allocation tags: every allocation a thread makes carries its current tag
(metrale_tag_push in include/metrale_gpu.h): a label, or the name of the
model module running. Tags are per thread and process-wide."""
import contextlib
import functools

from . import _lib
from .errors import check


def push(name):
    """Makes `name` this thread's current tag until the matching pop()."""
    check(_lib.lib().metrale_tag_push(_encode(name)), "metrale_tag_push")


def pop():
    """Pops this thread's innermost tag (MetraleError when none is pushed)."""
    check(_lib.lib().metrale_tag_pop(), "metrale_tag_pop")


def current():
    """This thread's current tag, or None."""
    t = _lib.lib().metrale_tag_current()
    return t.decode("utf-8", "replace") if t is not None else None


@contextlib.contextmanager
def _tag_cm(name):
    push(name)
    try:
        yield name
    finally:
        pop()


class tag:  # noqa: N801 (used as `with metrale.tag("x"):` and `@metrale.tag("x")`)
    """`with metrale.tag("encoder"): ...` tags what the block allocates;
    `@metrale.tag("loader")` does so for every call of a function."""

    def __init__(self, name):
        self.name = name
        self._cms = []

    def __enter__(self):
        cm = _tag_cm(self.name)
        cm.__enter__()
        self._cms.append(cm)
        return self.name

    def __exit__(self, *exc):
        return self._cms.pop().__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _tag_cm(self.name):
                return fn(*args, **kwargs)

        return wrapper


def _encode(name):
    if isinstance(name, bytes):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a tag is a str, not {type(name).__name__}")
    return name.encode("utf-8")
