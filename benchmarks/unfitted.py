"""What the held-out matches owe to the fit: the reproduction at the fitted defaults and
again with the fitted parameters set back to MODEL.md's values.

    python benchmarks/unfitted.py [--clusters N] [--out DIR]
    python benchmarks/unfitted.py --clusters 2000      # docs/calibration.md's: 104 s on 2 cores

Four parameters were fitted to rows of the paper's table (docs/calibration.md):
``n_evals``, ``ustar_hacking`` and ``sigma``, in one joint fit, to EvalStop's mean-JCT and
wasted-compute changes and its precision (and so the gain over SRTF-Est, the same number
as the JCT change), ``est_sigma`` to StopAt's FPR.  Those five rows are shown ``fitted`` and never counted; the fourteen others
are held out.  A held-out row can still
follow from a fitted one (the gain over FIFO moves with the cadence fitted to the gain
over SRTF-Est).  This runs ``fastsim reproduce`` twice, on the same clusters: as shipped,
and with the four parameters at MODEL.md's values (``fastsim.defaults.MODEL_VALUES``, in
every sweep's base), and prints each held-out row's estimate, interval and verdict under
both.  A match that
holds under both does not rest on the fit; one that holds only at the fitted values may.
docs/calibration.md quotes its table.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from fastsim.defaults import MODEL_VALUES
from fastsim.sweep.reproduce import ours_text, reproduce


def _rows(out: Path, clusters: int, overrides: dict | None) -> dict[str, dict]:
    """The scored rows of a reproduction in ``out`` (no figures), by result."""
    info = reproduce(out, clusters=clusters, figures_dir=None, report=out / "REPRODUCTION.md",
                     progress=False, base_overrides=overrides)
    return {r["result"]: r for r in info["rows"]}


def _cell(r: dict) -> str:
    """A row's estimate, interval and verdict, as REPRODUCTION.md prints them."""
    shown = " ".join(t for t in ours_text(r) if t)
    return f"{shown}, {r['verdict']}" + (f" ({r['detail']})" if r["detail"] else "")


def _at_least_2(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"--clusters={text} is invalid; allowed: an integer "
                                         ">= 2 (an interval needs two clusters)")
    return int(text)


def _pair(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ustar-healthy={text} is invalid; allowed: "
                                         "LO,HI, two numbers") from None
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=_at_least_2, default=500, help="clusters per cell, at "
                    "least 2 (default 500, about 40 s on 2 cores once numba has compiled)")
    ap.add_argument("--ustar-healthy", type=_pair, default=None, metavar="LO,HI",
                    help="healthy peaks in the MODEL.md-values run (default: as shipped, "
                    "starting where the fitted hacking range ends)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the two reproductions go (default: a temporary directory)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or Path(tmp)
        fitted = _rows(out / "fitted", a.clusters, None)
        model = _rows(out / "model_values", a.clusters, {
            **MODEL_VALUES, **({"ustar_healthy": a.ustar_healthy} if a.ustar_healthy else {})})
    print(f"held-out rows, {a.clusters} clusters per cell; MODEL.md's values: {MODEL_VALUES}"
          + (f", ustar_healthy {a.ustar_healthy}" if a.ustar_healthy else ""))
    print("| result | paper | fitted defaults | MODEL.md's values |\n|---|---|---|---|")
    for name, r in fitted.items():
        if not (r["fitted_by"] or r["tied_to"]):
            print(f"| {name} | {r['paper']} | {_cell(r)} | {_cell(model[name])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
