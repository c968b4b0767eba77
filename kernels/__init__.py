"""Numba kernels of fastsim: arrays, scalars and integer codes only.

Nothing here imports from ``fastsim``; the Python API builds the arrays, validates
them and calls in.  Decision kernels (``schedulers``, ``detectors``) take observed
quantities only: the information boundary of MODEL.md section 5 is their signature.
"""
