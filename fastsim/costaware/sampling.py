"""Sampling distributions of cost-aware SGD and their cost factor ``J(p) = S(p) C(p)``.

Mohri, Globerson, Kaplan, Koren & Mansour, "Cost-Aware Learning", arXiv 2604.28020
(MODEL.md section 10): with gradient-norm bounds ``G_i`` and costs ``c_i``,

* ``S(p) = sum_i G_i^2 / (n^2 p_i)`` bounds the second moment of ``grad f_i / (n p_i)``;
* ``C(p) = sum_i p_i c_i`` is the expected cost of one step;
* total cost to error ``eps`` scales as ``J(p) = S(p) C(p)``, minimised (Cauchy-Schwarz) by
  ``p_i* ∝ G_i / sqrt(c_i)`` with ``J(p*) = ((1/n) sum_i G_i sqrt(c_i))^2``.

Inputs are validated here; the kernels in ``fastsim.kernels.costaware`` trust them.
"""
from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
import polars as pl

from fastsim.config import is_real
from fastsim.values import as_float, float_or_nan
from fastsim.errors import ConfigError, first_twice, known_keywords
from fastsim.kernels import costaware as nb
from fastsim.values import SUMS_TO_ONE, exact_sum, sums_to_one


class Strategy(IntEnum):
    """Sampling strategies (mirrors the codes in ``fastsim.kernels.costaware``)."""

    UNIFORM = nb.UNIFORM
    GRADIENT_NORM = nb.GRADIENT_NORM
    COST_ONLY = nb.COST_ONLY
    OPTIMAL = nb.OPTIMAL

    @property
    def label(self) -> str:
        return self.name.lower()


STRATEGIES = tuple(s.label for s in Strategy)


def parse_strategy(name, field: str = "strategy") -> Strategy:
    """``Strategy`` from its name (``"uniform"``, ``"gradient_norm"``, ``"cost_only"``,
    ``"optimal"``) or the enum itself; anything else raises ``ConfigError``."""
    if isinstance(name, Strategy):
        return name
    try:
        return Strategy[str(name).upper()]
    except KeyError:
        raise ConfigError(f"{field}={name!r} is not a sampling strategy; allowed: "
                          f"{', '.join(STRATEGIES)}") from None


def check_lam(lam, field: str = "lam") -> float:
    """``lam`` as float in [0, 1] (-0.0 as 0.0), else ``ConfigError``."""
    # true and "0.1" are no weights (float() read them as 1, 0.1); 10**400 is NaN here
    # (float() raised OverflowError), refused too
    x = float_or_nan(lam) if is_real(lam) else math.nan
    if not 0.0 <= x <= 1.0:
        raise ConfigError(f"{field}={lam!r} is invalid; allowed: a number in [0, 1] (0 = pure "
                          "strategy, 1 = uniform)")
    return as_float(x)


def check_nonnegative(value, field: str, allowed: str = "a finite number >= 0") -> float:
    """``value`` as a finite float >= 0 (-0.0 as 0.0: one value, as ``store_floats`` reads
    a config's), else ``ConfigError``: ``field=value is invalid; allowed: {allowed}``."""
    # a bool or text is no number (float() read them); 10**400 is NaN here (float() raised
    # OverflowError), refused too
    x = float_or_nan(value) if is_real(value) else math.nan
    if not np.isfinite(x) or x < 0.0:
        raise ConfigError(f"{field}={value!r} is invalid; allowed: {allowed}")
    return as_float(x)


def check_choices(values, field: str, allowed: str) -> list:
    """``values`` as a non-empty list: a single number was a TypeError traceback ('float'
    object is not iterable), and so was a 0-d numpy array ('len() of unsized object'); a
    string was read letter by letter, a 2-D array row by row (a row refused as one value),
    and none gave an empty table without a word."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, np.ndarray)) \
            or (isinstance(values, np.ndarray) and values.ndim != 1) \
            or len(values) == 0:
        raise ConfigError(f"{field}={values!r} is invalid; allowed: a non-empty list of "
                          f"{allowed}")
    return list(values)


def check_distinct(given, values: list, field: str, allowed: str) -> list:
    """``values`` (``given`` as checked: labels, floats with -0.0 as 0.0), refused in one
    line when one is given twice: each is a row of a table, and one given twice was two
    identical rows (and -0.0 beside 0.0 a second row headed -0.0)."""
    twice = first_twice(values)
    if twice is not None:
        raise ConfigError(f"{field}={list(given)!r} gives {twice!r} twice; allowed: {allowed}")
    return values


def real_array(values, field: str, bools: bool = False) -> np.ndarray:
    """``values`` as a contiguous float64 array; text, None or complex numbers among them
    raise ``ConfigError`` naming ``field`` (numpy's cast was a ValueError or TypeError
    traceback, 'could not convert string to float'; rows of two lengths one about an
    'inhomogeneous shape').  Bools are refused unless ``bools`` (a 0/1 reward is one; a
    gradient bound or cost of True was read as 1 without a word), and so are masked
    entries of a numpy masked array (``np.asarray`` drops the mask: a masked reward or cost
    was read as the number under it, without a word), a list of masked rows' too."""
    try:  # np.ma's: keeps the masks of masked rows in a list, which np.asarray drops
        x = np.ma.asarray(values)
    except ValueError:  # ragged: [[1.0, 0.0], [1.0]]
        raise ConfigError(f"{field} is invalid (rows of different lengths); allowed: numbers, "
                          "ints or floats, in rows of one length") from None
    if np.ma.is_masked(x):
        i = int(np.flatnonzero(np.ma.getmaskarray(x))[0])
        raise ConfigError(f"{field} is invalid (masked entries, the first at flat index {i}); "
                          "allowed: numbers, ints or floats, with no entry masked (fill or "
                          "drop the masked ones)")
    x = np.ma.getdata(x)
    if x.dtype.kind not in "biuf":
        raise ConfigError(f"{field} is invalid ({x.dtype} values); allowed: numbers, ints or "
                          "floats")
    if not bools and (x.dtype.kind == "b" or _holds_bool(values)):
        raise ConfigError(f"{field} is invalid (True or False among them); allowed: numbers, "
                          "ints or floats")
    return np.ascontiguousarray(x, dtype=np.float64)


def _holds_bool(values) -> bool:
    """Whether a (nested) list or tuple holds a bool, which numpy casts to 1 or 0 beside
    other numbers ([True, 2.0] is a float64 array)."""
    if isinstance(values, (list, tuple)):
        return any(_holds_bool(v) for v in values)
    return isinstance(values, (bool, np.bool_))


def check_costs(c, field: str = "costs") -> np.ndarray:
    """1-D float64 array of finite, strictly positive costs, else ``ConfigError``."""
    x = real_array(c, field)
    if x.ndim != 1 or x.size == 0:
        raise ConfigError(f"{field} is invalid (shape {x.shape}); allowed: a non-empty 1-D "
                          "array")
    bad = ~np.isfinite(x) | (x <= 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(f"{field}[{i}]={float(x[i])!r} is invalid; allowed: a finite cost "
                          "above 0 (a sample that costs nothing makes J(p) meaningless)")
    return x


def check_gradient_bounds(G, n: int | None = None, field: str = "gradient_bounds") -> np.ndarray:
    """1-D float64 array of finite, non-negative bounds, not all zero, else ``ConfigError``."""
    x = real_array(G, field)
    if x.ndim != 1 or x.size == 0:
        raise ConfigError(f"{field} is invalid (shape {x.shape}); allowed: a non-empty 1-D "
                          "array")
    if n is not None and x.size != n:
        raise ConfigError(f"{field} is invalid ({x.size} entries, costs have {n}); allowed: "
                          "one per cost")
    bad = ~np.isfinite(x) | (x < 0.0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(f"{field}[{i}]={float(x[i])!r} is invalid; allowed: a finite "
                          "gradient-norm bound >= 0")
    if not (x > 0.0).any():
        raise ConfigError(f"{field} are all zero: every gradient vanishes, nothing to sample; "
                          "allowed: at least one above 0")
    return x


@known_keywords("fastsim.costaware.sampling_distribution()")
def sampling_distribution(G, c, strategy="optimal", lam: float = 0.0) -> np.ndarray:
    """Sampling probabilities ``p`` (n,) of a strategy mixed with uniform.

    ``p = (1 - lam) q + lam / n`` with ``q ∝ 1`` (uniform), ``G`` (gradient_norm),
    ``1/sqrt(c)`` (cost_only) or ``G/sqrt(c)`` (optimal).

    Parameters
    ----------
    G : array_like, shape (n,)
        Gradient-norm bounds, >= 0, not all zero.
    c : array_like, shape (n,)
        Per-sample gradient costs (any cost unit), > 0.
    strategy : str or Strategy
    lam : float in [0, 1]
        Weight of the uniform component.

    Examples
    --------
    >>> p = sampling_distribution([1.0, 1.0], [1.0, 4.0], "optimal")
    >>> [round(float(v), 4) for v in p]
    [0.6667, 0.3333]
    """
    c = check_costs(c)
    G = check_gradient_bounds(G, c.size)
    code = parse_strategy(strategy)
    lam = check_lam(lam)
    out = np.empty_like(G)
    nb.sampling_probs_nb(G, c, int(code), lam, out)
    return out


def check_probabilities(p, n: int, field: str = "p") -> np.ndarray:
    x = real_array(p, field)
    if x.shape != (n,):
        raise ConfigError(f"{field} has shape {x.shape}; allowed: ({n},)")
    if not np.isfinite(x).all() or (x < 0).any() or not sums_to_one(x):
        raise ConfigError(f"{field} is invalid (its sum is {exact_sum(x)!r}); allowed: "
                          f"probabilities finite and >= 0, {SUMS_TO_ONE}")
    return x


@known_keywords("fastsim.costaware.second_moment()")
def second_moment(G, p) -> float:
    """``S(p) = sum_i G_i^2 / (n^2 p_i)`` (inf if a sample with ``G_i > 0`` has ``p_i = 0``).

    Examples
    --------
    >>> second_moment([1.0, 1.0], [0.5, 0.5])
    1.0
    """
    G = check_gradient_bounds(G)
    return float(nb.second_moment_nb(G, check_probabilities(p, G.size)))


@known_keywords("fastsim.costaware.expected_cost()")
def expected_cost(c, p) -> float:
    """``C(p) = sum_i p_i c_i``, the expected cost of one stochastic gradient (cost units).

    Examples
    --------
    >>> expected_cost([1.0, 3.0], [0.5, 0.5])
    2.0
    """
    c = check_costs(c)
    return float(nb.expected_cost_nb(c, check_probabilities(p, c.size)))


@known_keywords("fastsim.costaware.cost_factor()")
def cost_factor(G, c, p) -> float:
    """``J(p) = S(p) C(p)``: total cost to reach a given error is proportional to it.

    Examples
    --------
    >>> cost_factor([1.0, 1.0], [1.0, 4.0], [0.5, 0.5])
    2.5
    """
    return second_moment(G, p) * expected_cost(c, p)


@known_keywords("fastsim.costaware.optimal_cost_factor()")
def optimal_cost_factor(G, c) -> float:
    """Closed form ``J(p*) = ((1/n) sum_i G_i sqrt(c_i))^2``.

    Examples
    --------
    >>> optimal_cost_factor([1.0, 1.0], [1.0, 4.0])
    2.25
    """
    c = check_costs(c)
    G = check_gradient_bounds(G, c.size)
    return float(nb.optimal_j_nb(G, c))


def _unit_scaled(G: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``G / max(G)``, ``c / max(c)`` and their ``J(p*)``, which must be a normal float."""
    G_unit, c_unit = G / G.max(), c / c.max()
    j_opt = float(nb.optimal_j_nb(G_unit, c_unit))
    if not nb.normal_total_nb(j_opt):
        raise ConfigError("gradient_bounds and costs: J(p*) underflows to 0 even with G and "
                          "c scaled by their maxima; allowed: the largest G_i sqrt(c_i) at "
                          "least about 1e-150 of max(G) sqrt(max(c))")
    return G_unit, c_unit, j_opt


@known_keywords("fastsim.costaware.ratio_table()")
def ratio_table(G, c, strategies=STRATEGIES, lams=(0.0,)) -> pl.DataFrame:
    """``S``, ``C``, ``J`` and ``J / J(p*)`` of each strategy and uniform mix.

    ``J / J(p*)`` is the predicted cost multiple over optimal sampling (>= 1).

    Examples
    --------
    >>> t = ratio_table([1.0, 2.0], [1.0, 1.0], ["uniform", "optimal"])
    >>> t["j_over_jopt"].round(3).to_list()
    [1.111, 1.0]
    """
    c = check_costs(c)
    G = check_gradient_bounds(G, c.size)
    strategies = check_choices(strategies, "strategies", ", ".join(STRATEGIES))
    lams = check_choices(lams, "lams", "uniform weights in [0, 1]")
    # each (strategy, lam) is a row: one given twice was two identical rows, and -0.0 a
    # second row of 0 headed "-0.0" (as --lams and SGDConfig refuse and read them)
    check_distinct(strategies, [parse_strategy(s, "strategies").label for s in strategies],
                   "strategies", "distinct strategies from " + ", ".join(STRATEGIES))
    weights = check_distinct(lams, [check_lam(lam, "lams") for lam in lams], "lams",
                             "distinct uniform weights in [0, 1]")
    j_opt = float(nb.optimal_j_nb(G, c))
    unit = None  # G, c and J(p*) scaled by their maxima, made when a ratio needs them
    rows = []
    for lam in weights:
        for s in strategies:
            p = sampling_distribution(G, c, s, lam)
            S = float(nb.second_moment_nb(G, p))
            C = float(nb.expected_cost_nb(c, p))
            J = S * C
            if nb.normal_total_nb(J) and nb.normal_total_nb(j_opt):
                ratio = J / j_opt
            else:
                # J / J(p*) is the same for G and c scaled by any factor: where J or J(p*)
                # overflows or underflows (G = 1e200 read inf / inf = NaN, G = 1e-200
                # divided by a J(p*) of 0) it is taken on G / max(G) and c / max(c), as
                # sampling_probs_nb rescales its scores; other inputs keep every bit
                unit = unit or _unit_scaled(G, c)
                ratio = (float(nb.second_moment_nb(unit[0], p))
                         * float(nb.expected_cost_nb(unit[1], p)) / unit[2])
            rows.append({"strategy": parse_strategy(s).label, "lam": float(lam), "S": S,
                         "C_cost_units": C, "J_cost_units": J, "j_over_jopt": ratio})
    return pl.DataFrame(rows)
