"""Package names that load on first use.

The command line imports ``fastsim.sweep``, ``fastsim.replay`` and ``fastsim.costaware``
to build its parsers, and their modules bring numba and polars: ``--help`` would wait a
second for them.  A package's public names load when first read instead.
"""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_names(package: str, exports: dict[str, str],
               namespace: dict) -> tuple[Callable[[str], object], Callable[[], list]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name of ``exports`` (name ->
    module) loads its module on first use, and any other public name is a submodule not
    imported yet (``fastsim.replay.logs``), as it was when the package imported them all.
    ``namespace``: the package's ``globals()``."""
    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        if not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
