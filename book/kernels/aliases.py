"""The old flat names of ``book.kernels``' modules, served as the modules they now are.

Until issue 44 ``book/kernels/`` was one flat folder; its modules now live in layers
(``book/kernels/__init__.py``'s map). The chapters' and labs' recorded code cells, and graded
student code, import by the old names (``from book.kernels import hopper``,
``from book.kernels.tensorcore import shfl_xor``, the tracer's "book.kernels.naive:swiglu_naive"),
so a package's table ``{old name: new dotted path}`` keeps them working, in two ways:

- :func:`install` returns the package's module-level ``__getattr__``: ``from book.kernels
  import hopper`` and ``book.kernels.hopper`` import the new path and give its module;
- :class:`AliasFinder`, on ``sys.meta_path``, answers ``import book.kernels.hopper`` (and
  ``from book.kernels.hopper import x``) with the same module object as the new path, never a
  second copy: ``sys.modules`` holds the one module under both names.

Standard library only and cheap: importing ``book.kernels`` imports none of the kernels
(``import book`` decides GPU or simulator before ``numba.cuda`` is imported). The grader's
child gets a copy of this module and a table of the graded modules alone
(autograder/sandbox/trusted.py).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<package>.<old name>`` and loads it as the module of its new path."""

    def __init__(self, package: str, table: dict[str, str]):
        self.package = package
        self.table = {f"{package}.{old}": new for old, new in table.items()}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.table:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(self.table[spec.name])
        # the import system writes the alias's spec on the module it gets: keep the real one
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        real = module.__spec__.loader_state
        if real is not None:
            module.__spec__ = real
        # the module was imported by its own name and ran there: nothing more to run


def install(package: str, table: dict[str, str]):
    """Put ``package``'s :class:`AliasFinder` on ``sys.meta_path`` (once: a second call
    replaces the first) and return the package's ``__getattr__`` for the old names."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not (isinstance(f, AliasFinder) and f.package == package)]
    sys.meta_path.insert(0, AliasFinder(package, table))

    def __getattr__(name):
        if name in table:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
