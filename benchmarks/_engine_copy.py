"""Load a copy of ``kernels/engine.py`` (or any kernel module) as a module of
``fastsim.kernels``, so that its relative imports resolve to the installed kernels; used
by the engine A/B and reference-count scripts."""
import importlib.util
import sys


def load_engine_copy(path, name):
    spec = importlib.util.spec_from_file_location(f"fastsim.kernels.{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
