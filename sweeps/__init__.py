"""The sweep definitions (TOML), shipped inside the package as ``fastsim.sweeps``.

This file only makes the folder a package so that an installed fastsim finds them
(``fastsim.resources.shipped("sweeps")``); the folder holds no code.
"""
