"""Numba kernels of fastsim: arrays, scalars and integer codes only.

Nothing here imports from ``fastsim``; the Python API builds the arrays, validates
them and calls in.  Decision kernels (``schedulers``, ``detectors``) take observed
quantities only: the information boundary of MODEL.md section 5 is their signature.

Installed as ``fastsim.kernels`` (``pyproject.toml`` maps this folder there); imported
under any other name (say ``kernels``, from the repository root) it would be a second
copy with its own compiled functions, so that is refused.
"""
if __name__ != "fastsim.kernels":
    raise ImportError(f"import the kernels as fastsim.kernels, not {__name__}")
