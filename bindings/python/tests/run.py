#!/usr/bin/env python3
"""Runs the package's tests: with pytest where it is installed (CI installs
it: scripts/install-deps.sh), else with the standard library's unittest
(the tests are unittest cases; pytest runs them the same way)."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    sys.path.insert(0, HERE)
    if importlib.util.find_spec("pytest") is not None and os.environ.get("METRALE_NO_PYTEST") != "1":
        import pytest

        sys.exit(pytest.main([HERE, "-q", "-rs", "-p", "no:cacheprovider"]))
    import unittest

    print("pytest is not installed: running the tests with unittest")
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py")
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
