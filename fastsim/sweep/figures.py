"""Run the figure scripts of ``figures/`` on a results directory.

Each script is a standalone file (``python figures/noise_sweep.py RESULTS OUT``) with a
``draw(sources, out, formats)`` function that reads only aggregated Parquet; this module
finds the inputs and calls them.  ``sources`` maps a sweep's name to its directory
(``summary.parquet``, ``jct_hist.parquet``), plus ``extracts`` for per-job extracts.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

FIGURE_SCRIPTS = ("headline", "noise_sweep", "base_rate", "composability", "k_tradeoff",
                  "jct_cdf", "trajectories", "frontier")


def figures_dir() -> Path:
    from fastsim.sweep.reproduce import repo_root

    return repo_root() / "figures"


def find_sources(results: Path) -> dict[str, Path]:
    """Sweep name -> directory, for ``results`` itself or its subdirectories."""
    sources: dict[str, Path] = {}
    for d in [results] + sorted(p for p in results.iterdir() if p.is_dir()):
        manifest = d / "sweep.json"
        if manifest.exists() and (d / "summary.parquet").exists():
            sources[json.loads(manifest.read_text())["name"]] = d
    if (results / "extracts").is_dir():
        sources["extracts"] = results / "extracts"
    return sources


def load_script(name: str, scripts: Path | None = None):
    scripts = scripts or figures_dir()
    path = scripts / f"{name}.py"
    if str(scripts) not in sys.path:
        sys.path.insert(0, str(scripts))  # the scripts share figures/_style.py
    spec = importlib.util.spec_from_file_location(f"fastsim_figure_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw_all(results: str | Path, out: str | Path, formats: tuple[str, ...] = ("png", "pdf"),
             scripts: Path | None = None, log=print) -> list[Path]:
    """Draw every figure whose inputs exist in ``results``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    results, out = Path(results), Path(out)
    if not results.is_dir():
        from fastsim.errors import ConfigError

        raise ConfigError(f"{results} is not a results directory")
    sources = find_sources(results)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in FIGURE_SCRIPTS:
        module = load_script(name, scripts)
        missing = [s for s in module.NEEDS if s not in sources]
        if missing:
            log(f"[figures] {name}: skipped, no results for {', '.join(missing)} in {results}")
            continue
        written += module.draw(sources, out, formats)
    return written
