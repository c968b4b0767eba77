"""Pre-registered scoring of the paper table (MODEL.md section 9).

``PAPER_ROWS`` declares, for every number of the paper's table, how it is scored and why,
and which parameter (if any) is fitted to it.  When it was written is ``DECLARED``: after
a first calibration, before the fit the defaults carry now.  It is not to be tuned to our
results: a change of tolerance is a change of the pre-registration and must say so in its
commit.

Verdicts (``verdict``):

* ``match``: our point estimate is within the declared tolerance of the paper's value
  (a bound: the bound holds, over several cells at every one, its interval simultaneous
  over the cells: ``simultaneous_minimum``; a paper range: our value
  lies inside it; a range of several estimates: *both* ends match their tolerance; a
  category: equal).
* ``miss``: it is not.
* ``not comparable (why)``: we have no estimate, or our 95% interval is wider than the
  tolerance band or crosses one of its edges (a bound, or an end of a paper range a value
  must lie in: our interval crosses it; a category, the k sweep's best k: it is not decided, ``DECIDED_SHARE``),
  so no verdict can be given at this sample size.
* ``fitted``: a parameter was fitted to this row (``fitted_by``); it is shown, with its
  deviation, but never counted as a match.  So is a range with a fitted row's estimate
  at an end, unless an end not fitted misses (then it is a held-out miss), and so is a
  bound decided at a cell a parameter was fitted at (``fitted_at``), unless a cell not
  fitted misses.  A fitted cell that does not decide a bound cannot change its verdict.

The headline is the number of *held-out* rows (not fitted) that match.

Why these tolerances.  The paper gives no intervals or sample sizes.  Its own detection
numbers are mutually consistent only to about 1 pp: at 60% hacking, recall 99.3% and FPR
1.5% imply precision 99.0% (it reports 98.3%), and precision 98.3% with recall 99.3% implies
FPR 2.6% (it reports 1.5%).  So a rate matches within 1 pp.  A small rate (below 5%)
matches within half its value (FPR 1.5% -> 0.75 pp): an absolute band would admit a rate
several times smaller, e.g. 0.0%.  A system-level change (mean JCT, wasted compute) is a
ratio of means from one trace whose load and run-time spread the paper does not state; it
matches within 15% of its value, i.e. roughly its leading digit (-9.4% -> [-10.8%, -8.0%]).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fastsim import defaults
from fastsim.stats import LEVEL

RATE_PP = 0.01        # detection rates: what the paper's P/R/FPR consistency allows
SMALL_RATE = 0.05     # below this a rate is scored relatively
SMALL_REL = 0.5       # ... within half its value
SYSTEM_REL = 0.15     # system-level relative changes: within 15% of the value

MATCH, MISS, FITTED, NOT_COMPARABLE = "match", "miss", "fitted", "not comparable"
TIED = "tied to the fit"
# A category (the k sweep's best k) is decided when our k has the highest F1 in at least
# this share of the cluster-bootstrap resamples, and its paired F1 lead over every other
# k has a 95% t interval above 0 (the percentile bootstrap alone is too sure with few
# clusters, as for a rate: fastsim.stats).
DECIDED_SHARE = 0.95

# When the tolerances below were declared, as the repository's history shows: not before
# every fit, so the report says what was fitted, and seen, before.
DECLARED = ("declared in commit `0aa2a5c`, after a first calibration (`est_sigma` 1.15, "
            "the default still; `n_evals` 6, `sigma` 0.01, hacking u* (0.4, 0.75)) and a full "
            "reproduction with it had been seen under a looser comparison (within 3 pp), and "
            "before the refit of `n_evals`, `ustar_hacking` and `sigma` (commit `51ed620` "
            "and later) whose values the defaults carry now.  The verdicts were made "
            "stricter after every result had been seen (commits `9649e5b` to `114f8c9`, "
            "2026-12-07, after a reading of the scoring by someone other than "
            "its author): a row that is a function of the fitted cell's numbers is `tied to "
            "the fit`, the single gains inside the paper's one range are shown beside the "
            "range row that scores it, a value whose interval crosses an edge of its band is "
            "`not comparable`, and a range's ends carry intervals simultaneous over its "
            "gains.  None can add a match (the band-edge rule also turns a miss whose "
            "interval crosses an edge into `not comparable`): the headline went from 6 "
            "matches of 14 held-out rows (the report regenerated at `162d08d`) to 1 of 9")


@dataclass(frozen=True)
class Tolerance:
    """A band around the paper's value: ``abs`` (a fraction, 0.01 = 1 pp) or ``rel``."""

    abs: float | None = None
    rel: float | None = None

    def width(self, paper: float) -> float:
        if self.abs is not None:
            return self.abs
        return abs(paper) * self.rel

    def shown_pp(self, paper: float) -> float:
        """The band's half-width in pp as ``text`` prints it (two significant digits)."""
        return float(f"{100 * self.width(paper):.2g}")

    def text(self, paper: float) -> str:
        if self.abs is not None:
            return f"±{self.shown_pp(paper):g} pp"
        return f"±{100 * self.rel:.0f}% rel. (±{self.shown_pp(paper):g} pp)"


def rate_tolerance(paper: float) -> Tolerance:
    """1 pp, or half the value for a rate below 5%."""
    if paper < SMALL_RATE:
        return Tolerance(rel=SMALL_REL)
    return Tolerance(abs=RATE_PP)


SYSTEM = Tolerance(rel=SYSTEM_REL)
WHY_RATE = "rate: the paper's P/R/FPR agree with each other to ~1 pp"
WHY_SMALL = "small rate: within half its value (an absolute band would admit 0%)"
WHY_SYSTEM = "system-level change from one unstated trace: within 15% of the value"


@dataclass(frozen=True)
class PaperRow:
    """One number of MODEL.md section 9 and how it is scored.

    ``kind``: ``value`` (``paper`` +- ``tol``), ``bound`` (ours >= ``paper``), ``within``
    (ours inside the paper's range ``paper`` = (lo, hi)), ``ends`` (our range's ends match
    the paper's range ends, each within ``tol``), ``category`` (ours == ``paper``).
    ``fitted_by`` names the parameter(s) fitted to this row, or is empty (held out).
    ``fitted_at``: for a bound over several cells, the cells (values of the axis it is
    over) a parameter was fitted at, each with the parameter(s); the bound is fitted when
    such a cell decides it (``bound_fitted_by``).
    ``derived_from``: the fitted quantities this row is a function of, and through what
    relation, or empty; such a row is ``tied to the fit``, whatever cell decides it.
    ``axis``: the sweep axis (a column) a row is at or over, whose ``fitted_at`` values
    are the fitted cells: a value row at one is fitted (``cell_fitted_by``).  ``over``:
    for a bound, the axis' range the paper states.
    """

    key: str
    result: str
    paper_text: str
    kind: str
    paper: Any
    tol: Tolerance | None
    reason: str
    fitted_by: str = ""
    fitted_at: tuple[tuple[float, str], ...] = ()
    derived_from: str = ""
    axis: str = ""
    over: tuple[float, float] | None = None


def _rate(key, result, paper, fitted_by="", **scope):
    tol = rate_tolerance(paper)
    why = WHY_SMALL if tol.rel is not None else WHY_RATE
    return PaperRow(key, result, _pct_text(paper), "value", paper, tol, why, fitted_by,
                    **scope)


def _pct_text(x: float) -> str:
    return f"{100 * x:.1f}%"


GAIN_RANGE = (0.089, 0.252)
WHY_WITHIN = "one scheduler's gain: inside the paper's range across schedulers"
# The pre-registration.  ``fitted_by`` is set where docs/calibration.md fits a parameter.
# n_evals, ustar_hacking and sigma are one joint fit (sweeps/calibration_fit.toml): the
# point whose largest miss over JCT, waste and precision is smallest, so each of the three
# is fitted to each of those rows.
JOINT_FIT = "n_evals, ustar_hacking, sigma"
# EvalStop decides on each job's own evaluations, so its recall and FPR do not depend on
# the share of hacking jobs b, and its precision at any b is Bayes' rule of them:
# P(b) = 1 / (1 + FPR/recall x (1 - b)/b).  At the fitted cell (b = 0.6) precision was
# fitted, so FPR/recall = (1 - P)/P x 0.6/0.4 is the fitted precision restated.
FITTED_SIGMA = ((defaults.SIGMA, JOINT_FIT),)
FITTED_PRECISION = ("EvalStop's fitted precision, with its recall, at the headline cell "
                    "(FPR = (1 - P)/P x b/(1 - b) x recall, Bayes' rule)")
PAPER_ROWS = (
    PaperRow("jct", "EvalStop + SRTF-Est vs SRTF-Est: mean JCT change", "-9.4%", "value",
             -0.094, SYSTEM, WHY_SYSTEM, fitted_by=JOINT_FIT),
    PaperRow("waste", "same: wasted compute change (post-peak reading)", "-21.8%", "value",
             -0.218, SYSTEM, WHY_SYSTEM, fitted_by=JOINT_FIT),
    _rate("precision", "EvalStop precision", 0.983, fitted_by=JOINT_FIT),
    _rate("recall", "EvalStop recall (any trigger)", 0.993),
    _rate("fpr", "EvalStop FPR", 0.015, derived_from=FITTED_PRECISION),
    _rate("stopat_precision", "StopAt-0.65 precision", 0.571),
    _rate("stopat_fpr", "StopAt-0.65 FPR on healthy RLHF", 0.645, fitted_by="est_sigma"),
    _rate("plateau_precision", "Loss-plateau precision", 0.570),
    _rate("plateau_recall", "Loss-plateau recall", 0.383),
    # The fit set sigma (defaults.SIGMA): a noise cell at it is the headline's, fitted.
    _rate("noise_001", "EvalStop precision, sigma = 0.01", 1.00, axis="sigma",
          fitted_at=FITTED_SIGMA),
    _rate("noise_012", "EvalStop precision, sigma = 0.12", 0.81, axis="sigma",
          fitted_at=FITTED_SIGMA),
    PaperRow("noise_bound", "EvalStop precision, min over sigma <= 0.05", ">= 91%", "bound",
             0.91, None, "a bound: holds or not", fitted_at=FITTED_SIGMA, axis="sigma",
             over=(-math.inf, 0.05)),
    # Precision rises with b, so the minimum is at b = 0.2, and is the fitted cell's
    # precision moved by Bayes' rule: 1 / (1 + 6 (1 - P)/P), >= 89% iff P >= 98.0%.
    PaperRow("base_rate_bound", "EvalStop precision, min over base rate 0.2-0.8", ">= 89%",
             "bound", 0.89, None, "a bound: holds or not",
             fitted_at=((defaults.BASE_RATE, JOINT_FIT),), axis="base_rate", over=(0.2, 0.8),
             derived_from="EvalStop's fitted precision at the headline cell, moved to each "
             "base rate by Bayes' rule (P(b) = 1 / (1 + FPR/recall x (1 - b)/b))"),
    *(PaperRow(f"gain_{s}", f"EvalStop JCT gain over {name}", "8.9% to 25.2%", "within",
               GAIN_RANGE, None, WHY_WITHIN)
      for s, name in (("fifo", "FIFO"), ("sjf_est", "SJF-Est"))),
    # The same quantity as the mean-JCT row (same cell, negated): fitted with it.
    PaperRow("gain_srtf_est", "EvalStop JCT gain over SRTF-Est", "8.9% to 25.2%", "within",
             GAIN_RANGE, None, WHY_WITHIN, fitted_by=JOINT_FIT),
    PaperRow("gain_loss_aware", "EvalStop JCT gain over LossAware", "8.9% to 25.2%", "within",
             GAIN_RANGE, None, WHY_WITHIN),
    # An end may be the SRTF-Est gain, fitted: ``verdict``'s ``ends_fitted``.
    PaperRow("gain_range", "range of those four gains", "8.9% to 25.2%", "ends", GAIN_RANGE,
             SYSTEM, "a range: both ends, each " + WHY_SYSTEM.split(": ")[1]
             + "; never a match while an end is a fitted row's gain"),
    PaperRow("k_balance", "k sweep: k balancing early detection and false positives", "k = 2",
             "category", 2, None, "the k maximising F1 of precision and stop recall (a "
             "trigger at completion is not an early detection); not comparable unless that "
             "k has the highest F1 in >= 95% of cluster-bootstrap resamples (the k cells "
             "resampled jointly) and a paired F1 lead over every other k whose 95% t "
             "interval is above 0. That condition was added after the results had been "
             "seen (ours k = 1 at 2,000 clusters, a miss): the row was scored on point "
             "estimates alone, a miss at 2 clusters as at 2,000. It only adds `not "
             "comparable` where the data cannot decide the best k; it cannot turn a miss "
             "into a match"),
)
ROWS_BY_KEY = {r.key: r for r in PAPER_ROWS}


@dataclass(frozen=True)
class Verdict:
    verdict: str   # MATCH, MISS, FITTED or NOT_COMPARABLE
    detail: str    # the deviation, or why not comparable

    @property
    def text(self) -> str:
        return f"{self.verdict} ({self.detail})" if self.detail else self.verdict


# The paper's values, their tolerances and our estimates are binary floats: a deviation
# equal to its tolerance in decimals (39.3% against 38.3% +- 1 pp: 0.393 - 0.383 is
# 0.010000000000000009) came out beyond it and was a miss.  A slack far below any
# estimate's precision (an interval of 2,000 clusters is ~1e-3 wide) decides as decimals do.
_SLACK = 1e-12


def _at_most(x: float, limit: float) -> bool:
    """``x <= limit``, up to the rounding of the floats that made them (``_SLACK``)."""
    return x <= limit + _SLACK


def _pp(x: float, limit: float, within: bool, shown: float | None = None) -> str:
    """``x`` (a fraction) as ``+1.0 pp``, with the fewest decimals, from one, at which its
    size reads on the side of ``limit`` (a fraction; ``shown``: that limit in pp as the
    table prints it) that the verdict ``within`` says.  At one decimal a miss by 1.004 pp
    of a 1 pp band read "+1.0 pp", a bound missed by 0.04 pp "-0.0 pp from the bound", a
    CI of ±1.04 pp "±1 pp is wider than the tolerance" of ±1 pp.  Where the printed limit
    is itself rounded across ``x`` (a miss by 3.28 pp of a band of 3.27 pp printed ±3.3),
    the unrounded limit is said."""
    size, bound = abs(100 * x), 100 * limit

    def reads_right(digits: int, against: float) -> bool:
        return (round(size, digits) <= against + 100 * _SLACK) == within

    digits = next((d for d in range(1, 7) if reads_right(d, bound)
                   and (shown is None or reads_right(d, shown))), None)
    if digits is not None:
        return f"{100 * x:+.{digits}f} pp"
    digits = next((d for d in range(1, 7) if reads_right(d, bound)
                   and round(size, d) != shown), 6)
    return f"{100 * x:+.{digits}f} pp (the tolerance is ±{bound:.4g} pp unrounded)"


def _finite(*xs) -> bool:
    return all(x is not None and isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def tolerance_text(row: PaperRow) -> str:
    if row.kind == "value":
        return row.tol.text(row.paper)
    if row.kind == "ends":
        return f"±{100 * row.tol.rel:.0f}% rel. each end"
    return {"bound": "bound holds", "within": "inside range",
            "category": f"equal, best in >= {100 * DECIDED_SHARE:g}% of resamples"}[row.kind]


def raw_verdict(row: PaperRow, ours: Any, lo: Any = None, hi: Any = None,
                decided: tuple[float, float] | None = None) -> Verdict:
    """``verdict`` before a fitted row is marked ``fitted``: how far a point of the model
    family is from the row (the fidelity frontier scores fitted rows too)."""
    if row.kind == "category":
        return _category_verdict(row, ours, decided)
    if row.kind == "ends":
        return _ends_verdict(row, ours, lo, hi)
    return _point_verdict(row, ours, lo, hi)


def _category_verdict(row: PaperRow, ours: Any,
                      decided: tuple[float, float] | None) -> Verdict:
    """The k row: equal to the paper's k, once the bootstrap ``decided`` (best share, lead's
    95% lower bound) says the data picks ours (``DECIDED_SHARE``)."""
    if ours is None:
        return Verdict(NOT_COMPARABLE, "no estimate")
    if decided is None:
        return Verdict(NOT_COMPARABLE, "no bootstrap of the clusters: how firmly the "
                                       "data picks it is unknown")
    share, lead_lo = decided
    if not _at_most(DECIDED_SHARE, share):
        return Verdict(NOT_COMPARABLE, f"k = {ours} has the highest F1 in only "
                                       f"{share_text(share)} of resamples, < "
                                       f"{100 * DECIDED_SHARE:g}%; run more clusters")
    if not lead_lo > 0:
        return Verdict(NOT_COMPARABLE, f"the 95% t interval of k = {ours}'s F1 lead "
                                       "over another k reaches 0; run more clusters")
    return Verdict(MATCH, "") if ours == row.paper else Verdict(MISS, f"ours {ours}")


def _ends_verdict(row: PaperRow, ours: tuple[float, float], lo: Any, hi: Any) -> Verdict:
    """A range of several estimates: each end within its tolerance of the paper's end, once
    each end's 95% interval is narrow enough to decide it."""
    (m_lo, m_hi), (p_lo, p_hi) = ours, row.paper
    if not _finite(m_lo, m_hi):
        return Verdict(NOT_COMPARABLE, "no estimate")
    d_lo, d_hi = m_lo - p_lo, m_hi - p_hi
    w_lo, w_hi = row.tol.width(p_lo), row.tol.width(p_hi)
    if lo is not None:  # each end's 95% interval: ``lo``, ``hi`` = (low end's, high end's)
        for a, b, w, p in zip(lo, hi, (w_lo, w_hi), (p_lo, p_hi)):
            if not _finite(a, b):
                return Verdict(NOT_COMPARABLE, "an end has no 95% CI (no spread between "
                                               "clusters): run more clusters")
            if not _at_most((b - a) / 2, w):
                half = _pp((b - a) / 2, w, False, row.tol.shown_pp(p)).lstrip("+")
                return Verdict(NOT_COMPARABLE, f"our 95% CI of an end ±{half} is wider than "
                                               "the tolerance; run more clusters")
            # each end is held to the rule of a value row (``_point_verdict``)
            if _crosses(a, b, (p - w, p + w)):
                return Verdict(NOT_COMPARABLE, "our 95% CI of an end crosses an edge of its "
                                               "tolerance band; run more clusters")
    ok_lo, ok_hi = _ends_within(row, ours)
    return Verdict(MATCH if ok_lo and ok_hi else MISS,
                   f"ends {_pp(d_lo, w_lo, ok_lo).replace(' pp', '', 1)} / "
                   f"{_pp(d_hi, w_hi, ok_hi)}")


def _point_verdict(row: PaperRow, ours: Any, lo: Any, hi: Any) -> Verdict:
    """One estimate against a bound, a paper range or a value with its tolerance, once its
    95% interval ``[lo, hi]`` exists (if asked for) and is narrow enough to decide."""
    if not _finite(ours):
        return Verdict(NOT_COMPARABLE, "no estimate (no jobs in the denominator)")
    if lo is not None and not _finite(lo, hi):  # an interval was asked for, none exists
        return Verdict(NOT_COMPARABLE, "no 95% CI (one cluster, or no spread between "
                                       "clusters): its precision is unknown; run more clusters")
    if row.kind in ("bound", "within"):
        # a bound or a range end has no band for the interval to fit in: one inside our
        # interval is on either side of it at this sample size (strictly inside: an end
        # on it holds the bound)
        ends = (row.paper,) if row.kind == "bound" else row.paper
        what = "the bound" if row.kind == "bound" else "an end of the range"
        if _crosses(lo, hi, ends):
            return Verdict(NOT_COMPARABLE, f"our 95% CI crosses {what}; run more clusters")
    if row.kind == "bound":
        d = ours - row.paper
        ok = _at_most(-d, 0.0)
        # a shortfall shows as one: below the bound by any amount is never "-0.0"
        shown = f"{100 * d:+.1f} pp" if ok else _pp(d, 0.0, False)
        return Verdict(MATCH if ok else MISS, f"{shown} from the bound")
    if row.kind == "within":
        a, b = row.paper
        if _at_most(a, ours) and _at_most(ours, b):
            return Verdict(MATCH, "")
        return Verdict(MISS, f"{_pp(ours - (a if ours < a else b), 0.0, False)} outside")
    width = row.tol.width(row.paper)
    d = ours - row.paper
    shown = row.tol.shown_pp(row.paper)
    if _finite(lo, hi) and not _at_most((hi - lo) / 2, width):
        half = _pp((hi - lo) / 2, width, False, shown).lstrip("+")
        return Verdict(NOT_COMPARABLE, f"our 95% CI ±{half} is wider than the tolerance; "
                                       "run more clusters")
    # each edge of the band is a bound: an interval across it is on either side of it at
    # this sample size (narrower than the band, it matched wherever its point fell)
    if _crosses(lo, hi, (row.paper - width, row.paper + width)):
        return Verdict(NOT_COMPARABLE, "our 95% CI crosses an edge of the tolerance band; "
                                       "run more clusters")
    ok = _at_most(abs(d), width)
    return Verdict(MATCH if ok else MISS, _pp(d, width, ok, shown))


def _crosses(lo: Any, hi: Any, edges) -> bool:
    """Whether the interval ``[lo, hi]`` has one of ``edges`` strictly inside it (an edge
    on its end is on its side)."""
    return _finite(lo, hi) and any(lo < e - _SLACK and e + _SLACK < hi for e in edges)


def share_text(share: float) -> str:
    """A share of resamples in percent, with the decimals that keep it on its side of
    ``DECIDED_SHARE`` (a share below it never printed at or above it), and below 100%
    unless it is all of them."""
    def kept(d: int) -> bool:
        x = round(100 * share, d)
        return ((x >= 100 * DECIDED_SHARE) == (share >= DECIDED_SHARE)
                and (x == 100) == (share == 1))
    d = next((d for d in range(1, 7) if kept(d)), 6)
    return f"{100 * share:.{d}f}%"


def _ends_within(row: PaperRow, ours: tuple[float, float]) -> tuple[bool, bool]:
    """Whether each end of our range is within its tolerance of the paper's end."""
    return tuple(_at_most(abs(m - p), row.tol.width(p)) for m, p in zip(ours, row.paper))


def _a_part_not_fitted_misses(parts) -> bool:
    """The rule for a row scored over parts (a range's ends, a bound's cells), given
    ``(fitted, within)`` per part: a part a parameter was fitted to is where the fit put it,
    so such a row's miss is held out only where a part not fitted misses too."""
    return any(not fitted and not within for fitted, within in parts)


def simultaneous_level(m: int) -> float:
    """The level of each of ``m`` cells' intervals that a bound over them is scored with:
    Bonferroni, so that all ``m`` hold their truths at once with probability >= ``LEVEL``
    (the chance that any misses is at most the sum of each one's), whatever the cells'
    dependence (a sweep's cells share their clusters' workloads)."""
    return 1.0 - (1.0 - LEVEL) / m


def simultaneous_minimum(cells) -> tuple[float, float, float]:
    """The minimum over ``cells`` (``(mean, lo, hi)`` each, the intervals at
    ``simultaneous_level``) and its simultaneous 95% interval, ``[min lo, min hi]``: where
    every cell's interval holds its truth, the least truth is at least the least ``lo`` and
    at most the ``hi`` of the cell with the least ``hi``.  "Precision >= 91% at every sigma"
    is a claim about every cell at once; the lowest cell's own 95% interval, chosen as the
    lowest among several, held the least truth less often than 95%.  NaN where a cell has
    no estimate or no interval (a minimum over the others is not the bound's)."""
    def least(xs):
        return min(xs) if _finite(*xs) else math.nan

    means, los, his = zip(*cells)
    return least(means), least(los), least(his)


def simultaneous_maximum(cells) -> tuple[float, float, float]:
    """The maximum over ``cells`` and its simultaneous interval, ``[max lo, max hi]``: the
    mirror of ``simultaneous_minimum`` (a range's high end is chosen as the highest)."""
    mean, lo, hi = simultaneous_minimum([(-m, -h, -l) for m, l, h in cells])
    return -mean, -hi, -lo


def cell_fitted_by(row: PaperRow, at: float) -> str:
    """What was fitted at the cell ``at`` (its value of ``row.axis``), from
    ``row.fitted_at``, or ""."""
    return next((by for a, by in row.fitted_at if abs(at - a) < 1e-9), "")


def bound_fitted_by(row: PaperRow, cells, decides: float) -> str:
    """What was fitted at the cell ``decides`` (its value of the axis) of the bound
    ``row`` over ``cells`` (``(at, mean, lo, hi)`` each), from ``row.fitted_at``, or ""
    (held out).  Only the deciding cell counts: the bound holds where every cell does, so
    a fitted cell above the lowest changes nothing, but one that decides it is the fit's
    number; held out all the same where a cell not fitted misses."""
    fitted = cell_fitted_by(row, decides)
    if fitted and _a_part_not_fitted_misses(
            (bool(cell_fitted_by(row, at)), raw_verdict(row, mean, lo, hi).verdict != MISS)
            for at, mean, lo, hi in cells):
        return ""
    return fitted


def verdict(row: PaperRow, ours: Any, lo: Any = None, hi: Any = None,
            ends_fitted: tuple[bool, bool] = (False, False),
            decided: tuple[float, float] | None = None) -> Verdict:
    """Score our estimate of ``row``: ``ours`` is a value (with its 95% interval ``lo``,
    ``hi``), a pair ``(min, max)`` for an ``ends`` row (``lo``, ``hi``: pairs, each end's
    interval), or a category.  ``ends_fitted``: for an ``ends`` row, whether each end is
    the estimate of a row a parameter was fitted to.  Such a range is never a match (the
    fit put that end where it is), and its miss is held out only where an end not fitted
    misses; else it is ``fitted``.  ``decided``: for a category, ``(share, lead_lo)``, the
    share of cluster-bootstrap resamples in which ours is the best, and the lowest lower
    95% t bound of its lead over another (``DECIDED_SHARE``); None, not comparable.

    Examples
    --------
    >>> verdict(ROWS_BY_KEY["plateau_recall"], 0.0, 0.0, 0.0001).verdict
    'miss'
    >>> verdict(ROWS_BY_KEY["fpr"], 0.0, 0.0, 0.0001).verdict
    'tied to the fit'
    >>> verdict(ROWS_BY_KEY["jct"], -0.122, -0.124, -0.120).text
    'fitted (-2.8 pp)'
    """
    v = raw_verdict(row, ours, lo, hi, decided)
    if row.fitted_by:
        return Verdict(FITTED, v.detail)
    if row.derived_from:
        return Verdict(TIED, v.detail)
    if any(ends_fitted) and v.verdict in (MATCH, MISS) and not _a_part_not_fitted_misses(
            zip(ends_fitted, _ends_within(row, ours))):
        return Verdict(FITTED, v.detail)
    return v


def in_headline(row: PaperRow, v: str) -> bool:
    """Whether a row scored ``v`` is one of the headline's held-out rows: not fitted, not
    tied to the fit, and not a single gain inside the paper's range (``within``), whose
    one paper number the range row (``ends``) scores; those are shown, not counted."""
    return v not in (FITTED, TIED) and row.kind != "within"


def registration_table() -> str:
    """The pre-registration as a Markdown table (printed in REPRODUCTION.md)."""
    lines = ["| result | paper | tolerance | why | fitted to it |", "|---|---|---|---|---|"]
    for r in PAPER_ROWS:
        lines.append(f"| {r.result} | {r.paper_text} | {tolerance_text(r)} | {r.reason} | "
                     f"{_fitted_text(r)} |")
    return "\n".join(lines)


def _fitted_text(r: PaperRow) -> str:
    """The table's "fitted to it" cell: the parameters, or at which cells of a bound."""
    if r.derived_from:
        return f"tied to the fit: a function of {r.derived_from}"
    if r.kind == "within":
        return "shown, not counted: the range row scores the paper's range"
    if r.kind != "bound" and r.fitted_at:
        return r.fitted_by or "no (held out: not at the fitted " + ", ".join(
            f"{r.axis} = {a:g}" for a, _ in r.fitted_at) + ")"
    at = "; ".join(f"if its cell at {a:g} decides it: {by}" for a, by in r.fitted_at)
    return r.fitted_by or at or "no (held out)"
