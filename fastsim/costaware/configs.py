"""The cost-aware experiments' configurations, ``ProblemConfig``, ``SGDConfig`` and
``GRPOConfig``, with their checks, apart from the modules that run them: ``fastsim
costaware``'s parser makes an option of every field, and ``sgd`` and ``experiment``
import numba and polars, which its ``--help`` and usage errors do not need.  Those
modules import the configurations from here, under the same names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fastsim.values import float_or_nan, is_integer, is_real, plain_fields, store_floats
from fastsim.errors import ConfigError, first_twice, known_keywords
from fastsim.kernels import codes as K

# the kernels' code of each name (fastsim.kernels.costaware_sgd)
PROBLEMS = {"least_squares": K.LEAST_SQUARES, "logistic": K.LOGISTIC}
COST_DISTS = {"lognormal": K.LOGNORMAL, "pareto": K.PARETO}
STEP_RULES = {"convex": K.STEP_CONVEX, "strongly_convex": K.STEP_STRONGLY_CONVEX}

# fastsim.costaware.sampling.STRATEGIES, SGDConfig's default: that module brings the
# kernels (numba); tests/test_costaware_sgd.py checks that the two agree
STRATEGIES = ("uniform", "gradient_norm", "cost_only", "optimal")

MAX_DESIGN = 50_000_000  # n * d: 0.4 GB of float64 a copy
# select_subset's exact search (fastsim.costaware.subset), here for the parser's help:
# 2^22 subsets: about a second; beyond that use the greedy
EXACT_MAX_N = 22


def _choice(name, value, allowed):
    # a name, not a list or table from a sweep file (``in`` hashes it: a TypeError)
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{name}={value!r} is invalid; allowed: {', '.join(allowed)}")


def _positive_int(name, value, lo=1, hi=2**63 - 1):
    """An integer in ``[lo, hi]``; ``hi`` defaults to int64's top (the kernels take it so)."""
    if not is_integer(value) or value < lo or value > hi:
        top = hi if hi != 2**63 - 1 else "2^63-1"
        raise ConfigError(f"{name}={value!r} is invalid; allowed: an integer from {lo} to {top}")


def _real(name, value, lo=None, hi=None, lo_open=False):
    x = float_or_nan(value) if is_real(value) else math.nan  # 10**400: NaN (float() raised)
    if not math.isfinite(x) or (lo is not None and (x < lo or (lo_open and x == lo))) or (
            hi is not None and x > hi):
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        raise ConfigError(f"{name}={value!r} is invalid; allowed: a number in "
                          f"{'(' if lo_open else '['}{lo_s}, {hi_s}]")


@dataclass(frozen=True)
class ProblemConfig:
    """One finite-sum problem instance.

    Attributes
    ----------
    kind : "least_squares" or "logistic"
    n, d : samples and dimension
    reg : L2 regularisation (the strong-convexity floor)
    scale_sigma : log-sd of row norms (heterogeneity of the gradient bounds ``G``)
    noise : target noise (least squares) or label noise (logistic)
    cost_dist : "lognormal" (heterogeneity ``cost_sigma``) or "pareto" (tail ``cost_alpha``)
    cost_corr : correlation of log-cost with log row norm, in [-1, 1]
    radius_factor : projection ball radius over ``|x*|`` (> 1 so ``x*`` is inside)
    seed, instance : RNG coordinates of the instance
    """

    kind: str = "least_squares"
    n: int = 256
    d: int = 8
    reg: float = 0.01
    scale_sigma: float = 0.5
    noise: float = 0.5
    cost_dist: str = "lognormal"
    cost_sigma: float = 1.0
    cost_alpha: float = 1.5
    cost_corr: float = 0.0
    radius_factor: float = 1.5
    seed: int = 2026
    instance: int = 0

    def __post_init__(self):
        plain_fields(self)  # n=np.int32(524288) * d=np.int32(8192) was 0
        _choice("kind", self.kind, PROBLEMS)
        _positive_int("n", self.n, 2, 1_000_000)
        _positive_int("d", self.d, 1, 10_000)
        if self.n * self.d > MAX_DESIGN:  # the design matrix, float64, and its copies
            raise ConfigError(f"n*d = {self.n * self.d} is too large; allowed: at most "
                              f"{MAX_DESIGN:,} (n={self.n}, d={self.d}: "
                              f"{self.n * self.d * 8 / 2**30:.1f} GiB a copy)")
        _real("reg", self.reg, 0.0, 1e6)
        _real("scale_sigma", self.scale_sigma, 0.0, 5.0)
        _real("noise", self.noise, 0.0, 1e6)
        _choice("cost_dist", self.cost_dist, COST_DISTS)
        _real("cost_sigma", self.cost_sigma, 0.0, 5.0)
        _real("cost_alpha", self.cost_alpha, 0.5, 100.0, lo_open=True)
        _real("cost_corr", self.cost_corr, -1.0, 1.0)
        _real("radius_factor", self.radius_factor, 1.0, 100.0, lo_open=True)
        _positive_int("seed", self.seed, 0)
        _positive_int("instance", self.instance, 0)
        # the fields named as name=value, which the command line says as its options
        if self.kind == "logistic" and self.reg <= 0.0:
            raise ConfigError(f"reg={self.reg!r} is invalid; allowed: a number above 0 with "
                              f"kind={self.kind!r}, whose optimum may otherwise be at infinity")
        if self.kind == "least_squares" and self.reg <= 0.0 and self.n < self.d:
            # A'A of rank n < d: the solve raised 'Matrix is singular', or gave mu of +-1e-17
            # from rounding, refused after it or (positive) taken for strong convexity
            raise ConfigError(f"reg={self.reg!r} is invalid; allowed: a number above 0 with "
                              f"kind={self.kind!r} and n={self.n} < d={self.d} (A'A is "
                              "singular, so the optimum is not unique and the instance not "
                              "strongly convex), or at least as many samples as dimensions")
        store_floats(self)  # -0.0 as 0.0, 1 as 1.0: one value, one table row and label

    def unused(self) -> dict[str, tuple[str, str]]:
        """The fields this instance does not read, each with the field and value that
        would make it read (``{"cost_alpha": ("cost_dist", "pareto")}``): the command line
        and sweep files refuse one given, which ran without a word as if left out."""
        if self.cost_dist == "lognormal":
            return {"cost_alpha": ("cost_dist", "pareto")}
        return {"cost_sigma": ("cost_dist", "lognormal")}


#: steps a SGD run may take: a run takes roughly 10^7 steps a second a core at d = 8 (fewer
#: as d grows), so 10^9 is minutes a run and hours for a default 64 replications x 4
#: strategies when ``eps`` is out of reach; 2^62 was a run that never ended
MAX_SGD_STEPS = 1_000_000_000


@dataclass(frozen=True)
class SGDConfig:
    """How SGD runs: step-size rule, target error and replications.

    Attributes
    ----------
    step : "strongly_convex" (``eta_t = 2 / (mu (t + 2))``, weighted averaging) or
        "convex" (``eta_t = 2 R / sqrt(S(p) (t + 1))``, uniform averaging)
    eps : target relative gap ``(f(xbar) - f*) / (f(0) - f*)``, in (0, 1]
    max_steps : cap per replication, at most ``MAX_SGD_STEPS``; runs that miss ``eps``
        report NaN cost (censored: ``summarize_sgd`` counts them as +inf)
    replications, seed : independent SGD runs and their RNG seed
    strategies : strategies to run (all see the same uniforms)
    lam : uniform mixing weight of every strategy
    """

    step: str = "strongly_convex"
    eps: float = 0.01
    max_steps: int = 2_000_000
    replications: int = 64
    seed: int = 1
    strategies: tuple = STRATEGIES
    lam: float = 0.0

    def __post_init__(self):
        from fastsim.costaware.sampling import check_lam, parse_strategy

        plain_fields(self)
        _choice("step", self.step, STEP_RULES)
        _real("eps", self.eps, 0.0, 1.0, lo_open=True)
        _positive_int("max_steps", self.max_steps, 1, MAX_SGD_STEPS)
        _positive_int("replications", self.replications, 2, 1_000_000)
        _positive_int("seed", self.seed, 0)
        # text was read letter by letter ('o' is no strategy), a number was a TypeError
        if not isinstance(self.strategies, (list, tuple)):
            raise ConfigError(f"strategies={self.strategies!r} is invalid; allowed: a list of "
                              "strategies from " + ", ".join(STRATEGIES))
        object.__setattr__(self, "strategies",
                           tuple(parse_strategy(s, "strategies").label for s in self.strategies))
        if not self.strategies:
            raise ConfigError("strategies is empty; allowed: any of " + ", ".join(STRATEGIES))
        twice = first_twice(self.strategies)
        if twice is not None:  # run twice, then paired row for row: a broadcast traceback
            raise ConfigError(f"strategies={list(self.strategies)!r} names {twice} twice; "
                              "allowed: distinct strategies from " + ", ".join(STRATEGIES))
        check_lam(self.lam)
        store_floats(self)  # -0.0 as 0.0, 1 as 1.0: one value, one table row and label



#: mini-batch distributions, in the order of the ``kernels.grpo.ARM_*`` codes
ARMS = ("uniform", "cost_aware", "cost_only", "advantage_only", "nonzero_uniform")
#: responses sampled per step (``prompts * group``): each thread holds four float arrays
#: of that length
MAX_RESPONSES = 10_000_000
#: evaluations kept in all (``seeds * arms * n_evals``): the curves, three float arrays
#: and then a table row each
MAX_CURVE_POINTS = 20_000_000
MAX_TOKENS = 1e6  # a response's (or prompt's) median length, in tokens
MAX_FLOOR = 1e6  # the advantage floor, in |A| (group-normalised: about 1)


@dataclass(frozen=True)
class GRPOConfig:
    """Knobs of the toy GRPO experiment (defaults run in well under a minute)."""

    seeds: int = 128
    seed: int = 7
    n_train: int = 256
    n_test: int = 256
    n_traces: int = 8
    n_features: int = 8
    median_len: float = 300.0
    len_sigma: float = 0.7
    length_effect: float = 0.3
    difficulty_mean: float = -0.5
    difficulty_sd: float = 1.0
    noise_sd: float = 0.5
    n_steps: int = 300
    cost_aware_step_factor: float = 2.0
    prompts: int = 16
    group: int = 8
    batch: int = 32
    lr: float = 0.1
    lam: float = 0.1
    floor: float = 0.0
    eval_every: int = 5
    prompt_median_len: float = 0.0
    prompt_len_sigma: float = 0.0
    arms: tuple = ("uniform", "cost_aware")

    def __post_init__(self):
        plain_fields(self)
        self._check_task()
        self._check_training()
        object.__setattr__(self, "arms", self._arms())
        self._check_evaluations()
        store_floats(self)  # -0.0 as 0.0, 1 as 1.0: one value, one table row and label

    def _check_task(self) -> None:
        """The toy task each seed draws: its sizes, within what a thread can hold, then
        its responses' lengths, difficulty and noise."""
        _positive_int("seeds", self.seeds, 2, 100_000)
        _positive_int("seed", self.seed, 0)
        _positive_int("n_train", self.n_train, 1, 1_000_000)
        _positive_int("n_test", self.n_test, 1, 1_000_000)
        _positive_int("n_traces", self.n_traces, 2, 1024)
        _positive_int("n_features", self.n_features, 2, 1024)
        task = (self.n_train + self.n_test) * self.n_traces * self.n_features
        if task > MAX_DESIGN:  # every thread draws its seed's task features, float64
            raise ConfigError(f"(n_train+n_test)*n_traces*n_features = {task} is too "
                              "large; "
                              f"allowed: at most {MAX_DESIGN:,} ({task * 8 / 2**30:.1f} GiB "
                              f"a thread)")
        # token counts are summed over every step's responses: 1e308 overflowed to inf
        # tokens, and the savings read NaN (an upper bound, as lr's)
        _real("median_len", self.median_len, 1.0, MAX_TOKENS)
        _real("len_sigma", self.len_sigma, 0.0, 3.0)
        _real("length_effect", self.length_effect, -10.0, 10.0)
        _real("difficulty_mean", self.difficulty_mean, -10.0, 10.0)
        _real("difficulty_sd", self.difficulty_sd, 0.0, 10.0)
        _real("noise_sd", self.noise_sd, 0.0, 10.0)

    def _check_training(self) -> None:
        """How each arm trains: steps, the responses of a step and the mini-batch drawn
        from them, learning rate, mixing, floor, evaluation interval, prompt lengths."""
        from fastsim.costaware.sampling import check_lam

        _positive_int("n_steps", self.n_steps, 1, 1_000_000)
        _real("cost_aware_step_factor", self.cost_aware_step_factor, 1.0, 100.0)
        _positive_int("prompts", self.prompts, 1, MAX_RESPONSES)
        _positive_int("group", self.group, 2, 4096)
        if self.prompts * self.group > MAX_RESPONSES:
            raise ConfigError(f"prompts*group = {self.prompts * self.group} is too large; "
                              f"allowed: at most {MAX_RESPONSES:,} responses a step")
        # a mini-batch of a step's responses (a huge one allocated its draws in every
        # seed's kernel and drew them each step)
        if not is_integer(self.batch) or not 1 <= self.batch <= self.prompts * self.group:
            raise ConfigError(f"batch={self.batch!r} is invalid; allowed: an integer from 1 to "
                              f"prompts*group = {self.prompts * self.group} (the responses of "
                              "a step)")
        _real("lr", self.lr, 0.0, 1e6, lo_open=True)
        check_lam(self.lam)
        _real("floor", self.floor, 0.0, MAX_FLOOR)
        _positive_int("eval_every", self.eval_every, 1, self.n_steps)
        _real("prompt_median_len", self.prompt_median_len, 0.0, MAX_TOKENS)
        _real("prompt_len_sigma", self.prompt_len_sigma, 0.0, 3.0)

    def _arms(self) -> tuple:
        """``arms`` as the tuple of names the run takes, or one refusal of all of it."""
        # one name is an arm; anything but a list of them (a number was a TypeError) is none
        arms = (self.arms,) if isinstance(self.arms, str) else tuple(self.arms) \
            if isinstance(self.arms, (list, tuple)) else ()
        if not arms or not all(isinstance(a, str) for a in arms) or arms[0] != "uniform" \
                or len(set(arms)) != len(arms) or not set(arms) <= set(ARMS):
            given = list(arms) if arms else self.arms
            raise ConfigError(f"arms={given!r} is invalid; allowed: distinct arms from "
                              f"{', '.join(ARMS)}, starting with uniform (the baseline)")
        return arms

    def _check_evaluations(self) -> None:
        """Every arm's run evaluated at its last step, and the curves within
        ``MAX_CURVE_POINTS``; after ``arms`` is stored (``steps_per_arm`` and ``n_evals``
        count its arms)."""
        # evaluations fall every eval_every steps: an arm's steps past its last multiple were
        # trained and never evaluated (n_steps=7 evaluated at step 5), and the summary's
        # "at the uniform horizon" and "end of the longer run" read an earlier step
        left = next((n for n in self.steps_per_arm if n % self.eval_every), None)
        if left is not None:
            longer = (f" and cost_aware_step_factor={self.cost_aware_step_factor!r} (the "
                      f"other arms' {left} steps)" if left != self.n_steps else "")
            raise ConfigError(f"n_steps={self.n_steps!r}{longer} with "
                              f"eval_every={self.eval_every!r} leave the last "
                              f"{left % self.eval_every} steps of a run never evaluated; "
                              "allowed: every arm's steps a multiple of the evaluation "
                              "interval")
        points = self.seeds * len(self.arms) * self.n_evals
        if points > MAX_CURVE_POINTS:
            raise ConfigError(f"seeds*arms*n_evals = {points} is too large; allowed: at most "
                              f"{MAX_CURVE_POINTS:,} (raise eval_every={self.eval_every!r}: "
                              f"n_evals={self.n_evals} is the longest arm's steps over it, "
                              "plus 1)")

    def unused(self) -> dict[str, tuple[str, str]]:
        """As ``ProblemConfig.unused``: prompt lengths are drawn only when their median is
        above 0."""
        if self.prompt_median_len == 0.0:
            return {"prompt_len_sigma": ("prompt_median_len", "above 0")}
        return {}

    @property
    def steps_per_arm(self) -> tuple[int, ...]:
        """Training steps per arm: every arm but uniform may run longer so that it can
        reach the uniform run's peak even when that peak is at the very end."""
        longer = int(round(self.n_steps * self.cost_aware_step_factor))
        return (self.n_steps,) + (longer,) * (len(self.arms) - 1)

    @property
    def n_evals(self) -> int:
        return max(self.steps_per_arm) // self.eval_every + 1


# A misspelt keyword (GRPOConfig(steps=20)) is one ConfigError naming the nearest field.
for _cls in (ProblemConfig, SGDConfig, GRPOConfig):
    _cls.__init__ = known_keywords(f"{_cls.__name__}()")(_cls.__init__)
