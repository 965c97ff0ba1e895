"""The shipped files parse as Python 3.8 and use the standard library only."""

import ast
import os
import sys
import unittest

from helpers import ASSETS

SHIPPED = ("gpuscope_probe.py", "sitecustomize.py")

STDLIB_USED = {
    "atexit", "collections", "functools", "importlib", "json", "os", "re", "resource", "stat", "sys",
    "threading", "time", "weakref",
}


class CompatibilityTest(unittest.TestCase):
    def trees(self):
        for name in SHIPPED:
            with open(os.path.join(ASSETS, name), encoding="utf-8") as handle:
                source = handle.read()
            yield name, ast.parse(source, filename=name, feature_version=(3, 8))

    def test_python_38_syntax_and_stdlib_imports_only(self):
        for name, tree in self.trees():
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    modules = [node.module or ""]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    self.assertTrue(
                        top in STDLIB_USED or top == "gpuscope_probe",
                        "%s imports %s" % (name, module),
                    )

    def test_no_torch_or_jax_import_anywhere(self):
        for name in SHIPPED:
            with open(os.path.join(ASSETS, name), encoding="utf-8") as handle:
                source = handle.read()
            for banned in ("import torch", "import jax", "__import__", "import_module(\"torch"):
                self.assertNotIn(banned, source, name)

    def test_only_the_documented_api_is_public(self):
        import gpuscope_probe

        self.assertEqual(gpuscope_probe.__all__, ["start", "stop"])

    @unittest.skipUnless(sys.version_info >= (3, 10), "needs sys.stdlib_module_names")
    def test_imports_are_really_stdlib(self):
        for module in STDLIB_USED:
            self.assertIn(module, sys.stdlib_module_names)
