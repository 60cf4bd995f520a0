"""`lazy_import`: a module that loads on first use, so that commands which never compute with torch
(`cardinal --help`, a small `cardinal explain` answered in exact arithmetic) do not pay for
importing torch, the largest part of a short command's start (`bench/results/startup.md`).

A lazy module loads on any attribute but `__spec__`: an `import torch` statement reads only
that (whether the module is still initializing), so the load runs at the first real use, in
ordinary code. Read through `import`, CPython discards any exception the load raises and hands
back the half-loaded module: a Ctrl-C or SIGTERM in those seconds was lost (the command ran on,
or met the half-loaded torch later: a RuntimeError, an abort).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """The top-level module `name`: the one already imported, else a module object that runs its
    import on the first attribute access (`importlib.util.LazyLoader`)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.__class__ = _LazyModule
    return module


class _LazyModule(importlib.util._LazyModule):  # type: ignore[name-defined,misc]
    """importlib's lazy module, but `__spec__` is read without loading it (module docstring)."""

    def __getattribute__(self, attr: str) -> object:
        if attr == "__spec__":
            return object.__getattribute__(self, attr)
        return super().__getattribute__(attr)


def is_tensor(value: object) -> bool:
    """Whether `value` is a torch tensor, without importing torch (a tensor means torch is loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and type(value).__module__ == "torch" and isinstance(value, torch.Tensor)
