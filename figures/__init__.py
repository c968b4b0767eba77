"""The figure scripts, shipped inside the package as ``fastsim.figures``.

Each script reads aggregated Parquet only and draws one figure; ``fastsim figures`` and
``fastsim costaware figures`` run them, and each also runs standalone
(``python figures/NAME.py RESULTS [OUT]``).
"""
