"""Cost-aware SGD simulator: cost to reach error ``eps``, per strategy, over replications.

A problem instance (least squares or L2-regularised logistic regression, heavy-tailed
row norms, heavy-tailed costs correlated or not with the gradient bounds) is a pure
function of ``ProblemConfig``; its optimum is solved exactly (Newton).  Replications
differ only in which samples SGD draws, and every strategy sees the same uniforms
(common random numbers), so per-replication ratios are paired.

Error ``eps`` is relative: stop when ``f(xbar) - f* <= eps (f(0) - f*)`` for the
averaged iterate ``xbar``.  Cost is ``sum c_i`` over queried samples (cost units;
costs are normalised to mean 1, so for uniform sampling cost ~ number of steps).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl

from fastsim.costaware.configs import (COST_DISTS, MAX_DESIGN, PROBLEMS, STEP_RULES,  # noqa: F401
                                       ProblemConfig, SGDConfig)
from fastsim.costaware.sampling import (STRATEGIES, check_costs, check_gradient_bounds,
                                        check_probabilities, real_array,
                                        sampling_distribution)
from fastsim.config import check_flags, is_real
from fastsim.errors import ConfigError, known_keywords
from fastsim.stats import (Estimate, bootstrap_ratio_ci, clopper_pearson, mean_ci,
                           quantile_ci)
from fastsim.kernels import costaware as nbc
from fastsim.kernels import costaware_sgd as nbs
from fastsim.progress import progress_bar


@dataclass(frozen=True)
class Problem:
    """A drawn instance: data ``A`` (n, d), ``b`` (n,), costs ``c`` (n,), bounds ``G`` (n,),
    optimum ``x_star``, ``f_star``, ``f0 = f(0)``, strong convexity ``mu``, ball ``radius``."""

    config: ProblemConfig
    A: np.ndarray = field(repr=False)
    b: np.ndarray = field(repr=False)
    c: np.ndarray = field(repr=False)
    G: np.ndarray = field(repr=False)
    x_star: np.ndarray = field(repr=False)
    f_star: float
    f0: float
    mu: float
    radius: float

    def __post_init__(self):
        """Every field checked, as the kernels trust them: a Problem built or changed by
        hand (``dataclasses.replace(problem, b=...)``) with arrays of another length than
        the config's ``n`` read past them without a word, and a NaN or negative ``mu``
        or a ``radius`` of 0 gave every run a NaN cost, read as a run that missed eps."""
        if not isinstance(self.config, ProblemConfig):
            raise ConfigError(f"Problem(): config={type(self.config).__name__} is invalid; "
                              "allowed: a ProblemConfig")
        n, d = self.config.n, self.config.d
        for name, shape in (("A", (n, d)), ("b", (n,)), ("c", (n,)), ("G", (n,)),
                            ("x_star", (d,))):
            x = real_array(getattr(self, name), f"Problem(): {name}")
            if x.shape != shape:
                raise ConfigError(f"Problem(): {name} has shape {x.shape}; allowed: {shape}, "
                                  f"as config.n={n} and config.d={d} say")
            if not np.isfinite(x).all():
                raise ConfigError(f"Problem(): {name} holds NaN or inf; allowed: finite numbers")
            object.__setattr__(self, name, x)
        check_costs(self.c, "Problem(): c")
        check_gradient_bounds(self.G, n, "Problem(): G")
        for name, low in (("f_star", None), ("f0", None), ("mu", 0.0), ("radius", 0.0)):
            v = getattr(self, name)
            x = float(v) if is_real(v) else math.nan
            if not math.isfinite(x) or (low is not None and x <= low):
                raise ConfigError(f"Problem(): {name}={v!r} is invalid; allowed: a finite "
                                  f"number{'' if low is None else ' above 0'}")
            object.__setattr__(self, name, x)
        # f0 = f(0) >= f* = min f; one rounding of each apart at most
        if self.f_star > self.f0 + 1e-9 * max(1.0, abs(self.f0)):
            raise ConfigError(f"Problem(): f_star={self.f_star!r} is above f0={self.f0!r}; "
                              "allowed: the optimum f_star at most f0 = f(0)")

    @property
    def code(self) -> int:
        return PROBLEMS[self.config.kind]


#: work of one Newton step (``n d^2 + d^3``) from which ``make_problem`` shows its steps on
#: a bar: about a second a step; at d = 2,000 a logistic instance took 4 minutes in silence
BAR_FROM_WORK = 1e9


@known_keywords("fastsim.costaware.make_problem()")
def make_problem(cfg: ProblemConfig = ProblemConfig(), progress: bool = False) -> Problem:
    """Draw the instance of ``cfg`` and solve it exactly.

    Solving takes damped Newton steps of O(n d^2 + d^3) each (one for least squares, then
    an eigenvalue decomposition of ``A'A``, O(n d^2 + d^3) too; up to 100 for logistic,
    fewer once the gradient stalls at its round-off floor, ``nbs.newton_done_nb``):
    seconds at d = 1,000, minutes to hours at d = 10,000.  ``progress``: show the steps on
    a bar (on stderr) when one takes about a second or more (``BAR_FROM_WORK``).

    Examples
    --------
    >>> pr = make_problem(ProblemConfig(n=32, d=3))
    >>> pr.A.shape, bool(pr.f_star <= pr.f0), round(float(pr.c.mean()), 6)
    ((32, 3), True, 1.0)
    """
    if not isinstance(cfg, ProblemConfig):  # a dict was an AttributeError
        raise ConfigError(f"cfg={type(cfg).__name__} is invalid; allowed: a ProblemConfig")
    check_flags(progress=progress)
    kind = PROBLEMS[cfg.kind]
    A = np.empty((cfg.n, cfg.d))
    b = np.empty(cfg.n)
    c = np.empty(cfg.n)
    param = cfg.cost_sigma if cfg.cost_dist == "lognormal" else cfg.cost_alpha
    nbs.make_problem_nb(kind, cfg.seed, cfg.instance, cfg.scale_sigma, cfg.noise,
                        COST_DISTS[cfg.cost_dist], param, cfg.cost_corr, A, b, c)
    least_squares = kind == nbs.LEAST_SQUARES
    with newton_bar("solving the instance", cfg.n, cfg.d, newton_steps(kind) + least_squares,
                    progress, extra=" and eigenvalues" if least_squares else "") as bar:
        x_star = optimum(kind, A, b, cfg.reg, np.ones(cfg.n), bar)
        f_star = float(nbs.full_loss_nb(kind, A, b, cfg.reg, x_star))
        f0 = float(nbs.full_loss_nb(kind, A, b, cfg.reg, np.zeros(cfg.d)))
        # global strong convexity: the logistic curvature can vanish far out, so only reg
        # counts
        mu = cfg.reg
        if least_squares:
            mu += float(np.linalg.eigvalsh(A.T @ A / cfg.n)[0])
            bar.update()
    if mu <= 0.0:
        # every instance is solved and its G bounded through x*, whatever the step rule:
        # step='convex' (which the message advised) changed nothing
        raise ConfigError(f"the instance is not strongly convex (mu={mu!r}); use reg > 0")
    radius = cfg.radius_factor * max(float(np.linalg.norm(x_star)), 1e-12)
    G = np.empty(cfg.n)
    nbs.gradient_bounds_nb(kind, A, b, cfg.reg, radius, G)
    return Problem(cfg, A, b, c, G, x_star, f_star, f0, mu, radius)


def newton_steps(kind: int) -> int:
    """The Newton steps ``optimum`` takes at most for a problem of ``kind`` (a code)."""
    return 1 if kind == nbs.LEAST_SQUARES else nbs.NEWTON_MAX_ITER


def newton_bar(what: str, n: int, d: int, steps: int, progress: bool, count: str = "",
               extra: str = ""):
    """The bar of Newton solves (``make_problem``'s, ``subset_report``'s), shown when
    ``progress`` and a step's work ``n d^2 + d^3`` is at least ``BAR_FROM_WORK``."""
    return progress_bar(total=steps, unit="step", leave=False,
                        enabled=progress and n * d ** 2 + d ** 3 >= BAR_FROM_WORK,
                        desc=f"{what} ({count}n={n}, d={d}): Newton steps, at most "
                             f"{steps}{extra}")


def optimum(kind: int, A: np.ndarray, b: np.ndarray, reg: float, weight: np.ndarray,
            bar) -> np.ndarray:
    """``nbs.optimum_nb``, a step at a time so that ``bar`` counts them (the steps a solve
    that converges early leaves are counted as done): the same steps, so the same optimum
    to the last bit (``weight`` is 0/1, whose sum is exact in any order)."""
    x = np.zeros(A.shape[1])
    steps = newton_steps(kind)
    seen = np.full(3, np.inf)
    for taken in range(1, steps + 1):
        x, grad_sq = nbs.newton_step_nb(kind, A, b, reg, weight, float(weight.sum()), x)
        bar.update()
        if nbs.newton_done_nb(grad_sq, seen):
            break
    bar.update(steps - taken)
    return x


def _second_moment_sampled(G, p) -> float:
    """``S(p)`` over the samples SGD can draw: a subset distribution (zero on dropped
    samples) estimates the kept part of the gradient, whose variance this bounds; the
    dropped part is bias, accounted for separately (``subset``)."""
    return float(nbc.second_moment_nb(np.where(p > 0.0, G, 0.0), p))


def check_problem(problem) -> None:
    """``problem`` is ``make_problem``'s (another object was an AttributeError)."""
    if not isinstance(problem, Problem):
        raise ConfigError(f"problem={type(problem).__name__} is invalid; allowed: a Problem, "
                          "as make_problem returns")


def explicit_distributions(distributions, problem: Problem,
                           strategies) -> list[tuple[str, np.ndarray]]:
    """``distributions`` (label -> probability vector over the problem's samples), each
    checked: one of another length was a numpy broadcast traceback, and a negative, NaN or
    unnormalised one ran SGD without a word (draws and importance weights assume a
    distribution); a label of a strategy also run made two arms of one name."""
    if distributions is None:
        return []
    if not isinstance(distributions, dict):
        raise ConfigError(f"distributions={type(distributions).__name__} is invalid; allowed: "
                          "a dict of label -> probability vector")
    out = []
    for label, p in distributions.items():
        if not isinstance(label, str) or not label or label in strategies:
            raise ConfigError(f"distributions label {label!r} is invalid; allowed: a name "
                              f"other than the strategies ({', '.join(strategies)})")
        out.append((label, check_probabilities(p, problem.G.size, f"distributions[{label!r}]")))
    return out


@known_keywords("fastsim.costaware.run_sgd()")
def run_sgd(problem: Problem, cfg: SGDConfig = SGDConfig(), progress: bool = True,
            distributions: dict | None = None) -> pl.DataFrame:
    """Cost to reach ``eps`` for every strategy and replication.

    ``distributions`` maps extra labels to explicit probability vectors (e.g. a subset's
    distribution, zero on dropped samples); they run after ``cfg.strategies``.

    Returns one row per (strategy, replication): ``cost_units`` (NaN if ``eps`` was not
    reached within ``max_steps``), ``steps`` (-1 then), ``final_gap``, ``reached``,
    ``cost_units_at_cap`` (what a run that missed ``eps`` spent by the cap, else NaN) and
    ``steps_at_cap`` (``max_steps`` for such a run, else NaN).

    Examples
    --------
    >>> pr = make_problem(ProblemConfig(n=32, d=3))
    >>> df = run_sgd(pr, SGDConfig(replications=4, eps=0.1), progress=False)
    >>> sorted(set(df["strategy"]))
    ['cost_only', 'gradient_norm', 'optimal', 'uniform']
    """
    check_problem(problem)
    if not isinstance(cfg, SGDConfig):
        raise ConfigError(f"cfg={type(cfg).__name__} is invalid; allowed: a SGDConfig")
    check_flags(progress=progress)
    runs = [(s, sampling_distribution(problem.G, problem.c, s, cfg.lam)) for s in cfg.strategies]
    runs += explicit_distributions(distributions, problem, cfg.strategies)
    from fastsim.compile_notice import first_call

    gap_target = cfg.eps * (problem.f0 - problem.f_star)
    # a first call compiled for 10-20 s in silence (a bar, if any, sat at its first step)
    with first_call("costaware_sgd.sgd_cost_to_eps_nb", what="the cost-aware kernels",
                    seconds="5-20"):
        frames = _cost_to_eps(problem, cfg, runs, gap_target, progress)
    return pl.concat(frames)


def _cost_to_eps(problem: Problem, cfg: SGDConfig, runs: list, gap_target: float,
                 progress: bool) -> list[pl.DataFrame]:
    """``run_sgd``'s rows of each ``(label, p)`` of ``runs``, one frame each."""
    frames = []
    for label, p in progress_bar(runs, desc="cost-aware SGD", enabled=progress, leave=False):
        s_bound = _second_moment_sampled(problem.G, p)
        cost = np.empty(cfg.replications)
        steps = np.empty(cfg.replications, np.int64)
        gap = np.empty(cfg.replications)
        nbs.sgd_cost_to_eps_nb(problem.code, problem.A, problem.b, problem.config.reg,
                               problem.mu, problem.radius, p, problem.c, STEP_RULES[cfg.step],
                               s_bound, problem.f_star, gap_target, cfg.max_steps, cfg.seed, 0,
                               cost, steps, gap)
        reached = steps >= 0
        frames.append(pl.DataFrame({
            "strategy": [label] * cfg.replications,
            "replication": np.arange(cfg.replications),
            "cost_units": np.where(reached, cost, np.nan), "steps": steps, "final_gap": gap,
            "reached": reached,
            # a censored run's cost to eps exceeds what it spent by the cap, its steps the cap
            "cost_units_at_cap": np.where(reached, np.nan, cost),
            "steps_at_cap": np.where(reached, np.nan, float(cfg.max_steps)),
        }))
    return frames


def predicted_factors(problem: Problem, strategies=STRATEGIES, lam: float = 0.0,
                      distributions: dict | None = None) -> pl.DataFrame:
    """``S``, ``C``, ``J`` per strategy and the prediction ``J / J(p*)``."""
    j_opt = float(nbc.optimal_j_nb(problem.G, problem.c))
    rows = []
    items = [(s, sampling_distribution(problem.G, problem.c, s, lam)) for s in strategies]
    items += explicit_distributions(distributions, problem, strategies)
    for label, p in items:
        S = _second_moment_sampled(problem.G, p)
        C = float(nbc.expected_cost_nb(problem.c, p))
        rows.append({"strategy": label, "S": S, "C_cost_units": C, "J_cost_units": S * C,
                     "predicted_j_over_jopt": S * C / j_opt})
    return pl.DataFrame(rows)


def _reached_columns(mine: pl.DataFrame) -> dict:
    """Cost and steps to ``eps`` of one strategy's runs, honest under the step cap.

    A run that missed ``eps`` is censored: its cost exceeds what it spent by the cap and
    its steps exceed the cap, hence every step count seen.  The median's order-statistic
    interval takes its lower bound with each censored run at that floor and its upper
    bound with it at +inf (``stats.quantile_ci``), so it covers whatever the censoring:
    +inf (or "n/a" for the median itself) once the cap censors what it needs.  A mean
    over the runs that reached ``eps`` would drop the slowest ones and shrink with the
    cap, so the mean is given only when every run reached ``eps``."""
    reached = mine["reached"].to_numpy()
    cost = mine["cost_units"].to_numpy()
    k, n = int(reached.sum()), int(reached.size)
    lo, hi = clopper_pearson(k, n)
    # costs and steps are >= 0: their intervals are cut there, as fastsim run's and the
    # GRPO summary's are (with 2 replications the mean cost read [-31.6, 64.3], and a
    # median of too few runs for an order-statistic bound had -inf below it)
    med = quantile_ci(cost, floor=mine["cost_units_at_cap"].to_numpy()).within(0.0, np.inf)
    floor = mine["steps_at_cap"].to_numpy() if "steps_at_cap" in mine.columns else None
    med_steps = quantile_ci(np.where(reached, mine["steps"].to_numpy(), np.inf),
                            floor=floor).within(0.0, np.inf)
    e = mean_ci(cost).within(0.0, np.inf) if k == n else Estimate(np.nan, np.nan, np.nan, k)
    return {"n": n, "reached_frac": k / n, "reached_lo": lo, "reached_hi": hi,
            "cost_units_median": med.mean, "cost_units_median_lo": med.lo,
            "cost_units_median_hi": med.hi,
            "steps_median": med_steps.mean, "steps_median_lo": med_steps.lo,
            "steps_median_hi": med_steps.hi,
            "cost_units_mean": e.mean, "cost_units_lo": e.lo, "cost_units_hi": e.hi}


# what summarize_sgd reads of run_sgd's rows
RUN_COLUMNS = ("strategy", "replication", "cost_units", "steps", "reached",
               "cost_units_at_cap")


def _check_paired(runs: pl.DataFrame, baseline: str, allowed: str) -> None:
    """Each strategy's replications once, and the baseline's: the ratio pairs them in
    replication order.  Two tables concatenated counted every run twice (n doubled, the
    intervals narrowed), a strategy of replications 2-5 beside a baseline of 0-3 was paired
    2 with 0 without a word, and one of another count was numpy's broadcast error."""
    twice = runs.filter(runs.select("strategy", "replication").is_duplicated())
    if twice.height:
        raise ConfigError(f"summarize_sgd(): runs holds replication {twice['replication'][0]} "
                          f"of strategy {twice['strategy'][0]!r} twice; {allowed}, each "
                          "(strategy, replication) once")
    reps = runs.group_by("strategy", maintain_order=True).agg(pl.col("replication").sort())
    base = reps.filter(pl.col("strategy") == baseline)["replication"]
    if base.len() == 0:  # not run: no ratio is simulated
        return
    for strategy, mine in reps.iter_rows():
        if mine != base[0].to_list():
            lone = min(set(mine) ^ set(base[0]))
            where = (strategy, baseline) if lone in mine else (baseline, strategy)
            raise ConfigError(f"summarize_sgd(): runs holds replication {lone} of strategy "
                              f"{where[0]!r} and not of {where[1]!r}; {allowed}, the baseline's "
                              "replications in every strategy (the ratio pairs them)")


@known_keywords("fastsim.costaware.summarize_sgd()")
def summarize_sgd(runs: pl.DataFrame, problem: Problem, lam: float = 0.0,
                  distributions: dict | None = None, baseline: str = "optimal") -> pl.DataFrame:
    """Per strategy: the share of runs reaching ``eps`` (exact binomial CI), the median
    cost and steps to ``eps`` with distribution-free CIs (``_reached_columns``), the mean
    cost when no run was censored, the simulated cost ratio over ``baseline`` (pooled
    ratio of paired replications, bootstrap CI) and the predicted ratio
    ``J / J(baseline)``.  The pooled ratio, like the mean, is given only when every
    replication of both strategies reached ``eps``: over the pairs that did, it would
    drop the slowest runs, unevenly between the two."""
    check_problem(problem)
    from fastsim.summary import check_table

    allowed = "allowed: the rows of run_sgd"
    check_table(runs, "summarize_sgd", "runs", RUN_COLUMNS, allowed)
    explicit_distributions(distributions, problem, STRATEGIES)  # a dict of labels, checked
    labels = set(distributions or {})
    # a baseline of another type was a polars ComputeError, a distribution's label and a
    # label of runs that distributions lacks were "strategy='x' is not a sampling strategy"
    if not isinstance(baseline, str) or baseline not in {*STRATEGIES, *labels}:
        raise ConfigError(f"summarize_sgd(): baseline={baseline!r} is invalid; allowed: a "
                          f"strategy ({', '.join(STRATEGIES)}) or a label of distributions")
    unknown = [s for s in runs["strategy"].unique(maintain_order=True)
               if s not in STRATEGIES and s not in labels]
    if unknown:
        raise ConfigError(f"summarize_sgd(): runs holds strategy {unknown[0]!r}, neither a "
                          "sampling strategy nor a label of distributions; allowed: the "
                          "distributions run_sgd was given, as distributions=")
    _check_paired(runs, baseline, allowed)
    ran = set(runs["strategy"].unique())
    strategies = [s for s in runs["strategy"].unique(maintain_order=True) if s not in labels]
    # the baseline's J is predicted even when it was not run (no simulated ratio then); a
    # distribution's is among distributions'
    wanted = strategies if baseline in labels else [*strategies, baseline]
    pred = predicted_factors(problem, list(dict.fromkeys(wanted)), lam, distributions)
    j_base = pred.filter(pl.col("strategy") == baseline)["J_cost_units"].item()
    base = runs.filter(pl.col("strategy") == baseline).sort("replication")["cost_units"].to_numpy()
    rows = []
    for row in pred.iter_rows(named=True):
        s = row["strategy"]
        if s not in ran:  # the baseline predicted for its J only; a distribution's row stays
            continue
        mine = runs.filter(pl.col("strategy") == s).sort("replication")
        cost = mine["cost_units"].to_numpy()
        ok = (np.isfinite(cost) & np.isfinite(base) if base.size
              else np.zeros(cost.size, dtype=bool))
        r = bootstrap_ratio_ci(cost, base) if ok.all() else Estimate(np.nan, np.nan, np.nan,
                                                                      int(ok.sum()))
        rows.append({
            "strategy": s,
            **_reached_columns(mine),
            "predicted_ratio": row["J_cost_units"] / j_base,
            "simulated_ratio": r.mean, "simulated_ratio_lo": r.lo, "simulated_ratio_hi": r.hi,
            "n_pairs": r.n, "S": row["S"], "C_cost_units": row["C_cost_units"],
        })
    return pl.DataFrame(rows)


def config_columns(problem_cfg: ProblemConfig, sgd_cfg: SGDConfig) -> dict:
    """Flat dict of the knobs, to tag result rows in sweeps."""
    d = {f"problem_{k}": v for k, v in asdict(problem_cfg).items()}
    d.update({f"sgd_{k}": v for k, v in asdict(sgd_cfg).items() if k != "strategies"})
    return d


# Built by hand too: a misspelt keyword is one ConfigError naming the nearest field.
Problem.__init__ = known_keywords("Problem()")(Problem.__init__)
