"""``fastsim costaware`` end to end on tiny inputs: commands, sweep files, figures."""
import math
import re
from pathlib import Path

import polars as pl
import pytest

from conftest import one_line
from fastsim.cli import main
from fastsim.costaware.sweep import load_costaware_sweep
from fastsim.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_ratios_and_bad_input(capsys):
    assert main(["costaware", "ratios", "--n", "16", "--d", "2"]) == 0
    assert "j_over_jopt" in capsys.readouterr().out
    assert main(["costaware", "ratios", "--n", "16", "--cost-corr", "3"]) == 2
    assert "--cost-corr=3 is invalid; allowed: a number in [-1, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("args, said", [
    (["ratios", "--cost-alpha", "3"], "--cost-alpha is given but would not be used (it applies "
     "to --cost-dist pareto); allowed: --cost-alpha with --cost-dist pareto"),
    (["sgd", "--cost-dist", "pareto", "--cost-sigma", "2"], "--cost-sigma is given but would "
     "not be used (it applies to --cost-dist lognormal)"),
    (["grpo", "--prompt-len-sigma", "1"], "--prompt-len-sigma is given but would not be used "
     "(it applies to --prompt-median-len above 0)"),
])
def test_an_option_the_run_would_not_read_is_refused(args, said, capsys, tmp_path):
    """--cost-alpha 3 with the default lognormal costs ran lognormal costs, as if it had not
    been typed (and so --cost-sigma with Pareto costs, --prompt-len-sigma with no prompt
    lengths): refused before any work or output."""
    out = tmp_path / "o"
    one_line(capsys, ["costaware", *args, "--out", str(out)], said)
    assert not out.exists()


def test_a_sweep_field_no_point_reads_is_refused(tmp_path):
    for text, said in [
            ('experiment = "sgd"\n[base]\ncost_alpha = 3.0\n',
             'cost_alpha is given but would not be used at any point (it applies to '
             'cost_dist = "pareto")'),
            ('experiment = "grpo"\n[axes]\nprompt_len_sigma = [0.5, 1.0]\n',
             "prompt_len_sigma is given but would not be used at any point (it applies to "
             "prompt_median_len above 0)")]:
        (tmp_path / "s.toml").write_text(text)
        with pytest.raises(ConfigError, match=r"^s\.toml: " + re.escape(said)):
            load_costaware_sweep(tmp_path / "s.toml")
    # read at some points (the Pareto ones) it is allowed
    (tmp_path / "s.toml").write_text('experiment = "sgd"\n[axes]\ncost_dist = ["lognormal", '
                                     '"pareto"]\ncost_alpha = [2.0]\n')
    assert len(load_costaware_sweep(tmp_path / "s.toml").points()) == 2


def test_shipped_sweeps_parse():
    for path in sorted((REPO / "sweeps").glob("costaware_*.toml")):
        spec = load_costaware_sweep(path)
        assert spec.points(), path


def test_sweep_and_figures(tmp_path):
    toml = tmp_path / "costaware_sgd.toml"
    toml.write_text('name = "costaware_sgd"\nexperiment = "sgd"\nreplications = 4\nseed = 1\n'
                    '[base]\nn = 16\nd = 2\neps = 0.1\n'
                    '[axes]\nkind = ["least_squares"]\nstep = ["convex"]\n'
                    'cost_corr = [0.0]\ncost_sigma = [0.0, 1.0]\n')
    out = tmp_path / "res"
    assert main(["costaware", "sweep", str(toml), "--out", str(out)]) == 0
    summary = pl.read_parquet(out / "costaware_sgd.summary.parquet")
    assert summary.height == 8 and {"predicted_ratio", "simulated_ratio"} <= set(summary.columns)
    assert main(["costaware", "grpo", "--seeds", "2", "--n-steps", "10", "--n-train", "8",
                 "--n-test", "8", "--out", str(out)]) == 0
    assert main(["costaware", "figures", str(out)]) == 0
    for stem in ("costaware_cost_vs_heterogeneity", "costaware_ratios", "costaware_grpo"):
        assert (out / "figures" / f"{stem}.png").stat().st_size > 0
        assert (out / "figures" / f"{stem}.pdf").stat().st_size > 0


def test_figures_when_no_run_reached_eps(tmp_path, capsys):
    """Every cost NaN (no run reached eps): the log axis of the cost figure was a
    matplotlib ValueError traceback; the panel now says so."""
    out = tmp_path / "res"
    assert main(["costaware", "sgd", "--n", "16", "--d", "2", "--eps", "1e-6", "--max-steps",
                 "2", "--replications", "2", "--out", str(out)]) == 0
    assert pl.read_parquet(out / "costaware_sgd.summary.parquet")["reached_frac"].max() == 0
    assert main(["costaware", "figures", str(out)]) == 0
    assert (out / "figures" / "costaware_cost_vs_heterogeneity.png").stat().st_size > 0
    assert "Traceback" not in capsys.readouterr().err


def test_figures_of_correlated_costs_only_skip_the_ratio_figure_and_say_so(tmp_path, capsys):
    """The ratio figure draws uncorrelated costs: a table of --cost-corr 0.5 only had no
    row of it, and `costaware figures` was matplotlib's ValueError traceback ('Number of
    rows must be a positive integer, not 0') after the first figure was written."""
    out = tmp_path / "res"
    assert main(["costaware", "sgd", "--n", "16", "--d", "2", "--eps", "0.1", "--cost-corr",
                 "0.5", "--replications", "2", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["costaware", "figures", str(out)]) == 0
    said = capsys.readouterr()
    assert "Traceback" not in said.err
    assert (f"skipped {out / 'figures' / 'costaware_ratios'}: "
            f"{out / 'costaware_sgd.summary.parquet'} has no row with problem_cost_corr = 0"
            in said.out)
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "costaware_cost_vs_heterogeneity.pdf", "costaware_cost_vs_heterogeneity.png"]


def test_cost_figure_names_the_strategies_it_leaves_out_where_a_run_missed_eps():
    """A point where one replication missed eps has no mean cost (NaN): that strategy's line
    lost the point, or vanished from the panel, which then read as if it had not been run.
    The panel now names what it left out: the strategies, and for each how many of its runs
    there missed eps at how many points (it read "a run" whether one run of 4 or every
    run missed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from fastsim.sweep.figures import load_script

    fig = load_script("costaware_cost_vs_heterogeneity")
    rows = pl.DataFrame({"strategy": ["uniform", "cost_only", "optimal", "uniform"],
                         "sgd_step": ["convex"] * 4, "problem_cost_sigma": [0.0, 0.0, 0.0, 1.0],
                         "cost_units_mean": [math.nan, math.nan, 2.0, 3.0],
                         "cost_units_lo": [math.nan, math.nan, 1.0, 2.0],
                         "cost_units_hi": [math.nan, math.nan, 3.0, 4.0],
                         "n": [4, 4, 4, 4], "reached_frac": [0.0, 0.75, 1.0, 1.0]})
    colors = dict.fromkeys(fig.ORDER, "k")
    _, ax = plt.subplots()
    fig._panel(ax, rows, colors)
    assert [t.get_text() for t in ax.texts] == [
        "not drawn where a run missed eps:\nuniform: 4 of 4 runs missed it, at 1 point\n"
        "cost only: 1 of 4 runs missed it, at 1 point"]
    _, ax = plt.subplots()
    fig._panel(ax, pl.concat([rows, rows.with_columns(problem_cost_sigma=pl.lit(2.0))]),
               colors)
    assert ax.texts[0].get_text().splitlines()[1] == "uniform: 8 of 8 runs missed it, at 2 points"
    _, ax = plt.subplots()
    fig._panel(ax, rows.filter(pl.col("cost_units_mean").is_finite()), colors)
    assert len(ax.texts) == 0
    plt.close("all")


def test_ratio_figure_names_the_strategies_without_a_simulated_ratio(tmp_path, monkeypatch):
    """The simulated ratio is NaN where a run of the strategy or of optimal missed eps: its
    point was left out of the ratio figure without a word.  The panel now names them, each
    with how many of its pairs lost a run that missed, at how many points (the names alone
    read the same for one pair as for all; and "a run missed eps" was said where optimal
    was not run), and the note's n is over the points drawn (a left-out point's n_pairs,
    its pairs that both reached eps, read as every point's: "n >= 0")."""
    from fastsim.sweep.figures import load_script

    fig = load_script("costaware_ratios")
    # optimal ran at sigma 1 and 2, not at 3 (a strategies axis runs each alone)
    rows = [("uniform", 1.0, math.nan, 6), ("uniform", 2.0, math.nan, 7),
            ("uniform", 3.0, math.nan, 0), ("gradient_norm", 1.0, 1.5, 8),
            ("gradient_norm", 2.0, 1.6, 8), ("cost_only", 1.0, math.nan, 0),
            ("cost_only", 2.0, 1.7, 8), ("optimal", 1.0, 1.0, 8), ("optimal", 2.0, 1.0, 8)]
    n = len(rows)
    pl.DataFrame({"strategy": [r[0] for r in rows], "sgd_step": ["convex"] * n,
                  "problem_kind": ["least_squares"] * n, "problem_cost_corr": [0.0] * n,
                  "problem_cost_sigma": [r[1] for r in rows], "predicted_ratio": [2.0] * n,
                  "simulated_ratio": [r[2] for r in rows],
                  "simulated_ratio_lo": [r[2] - 0.1 for r in rows],
                  "simulated_ratio_hi": [r[2] + 0.1 for r in rows],
                  "n_pairs": [r[3] for r in rows], "n": [8] * n}
                 ).write_parquet(tmp_path / "costaware_sgd.summary.parquet")
    said = []
    monkeypatch.setattr(fig.S, "save", lambda figure, out, stem: said.extend(
        [*(t.get_text() for ax in figure.axes for t in ax.texts),
         *(t.get_text() for t in figure.texts)]) or [])
    fig.main(tmp_path, tmp_path)
    assert said[0] == ("not drawn (no simulated ratio):\n"
                       "uniform: 3 of 16 pairs had a run miss eps, at 2 points\n"
                       "uniform: optimal not run, at 1 point\n"
                       "cost only: 8 of 8 pairs had a run miss eps, at 1 point"), said
    assert any("over n >= 8 paired replications per point" in t for t in said), said


def test_the_cost_aware_figures_write_what_they_leave_out_in_one_place(tmp_path,
                                                                         monkeypatch):
    """The cost figure and the ratio figure each wrote their "not drawn" note and its
    point count by hand, alike; both go through _style.not_drawn_note and at_points."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from fastsim.figures import _style as S
    from fastsim.sweep.figures import load_script

    notes, note = [], S.not_drawn_note
    monkeypatch.setattr(S, "not_drawn_note", lambda ax, why, missed, top=False: (
        notes.append((why, list(missed), top)), note(ax, why, missed, top)))
    assert (S.at_points(1), S.at_points(2)) == ("at 1 point", "at 2 points")
    _, ax = plt.subplots()
    S.not_drawn_note(ax, "anywhere", [])
    assert len(ax.texts) == 0 and notes.pop() == ("anywhere", [], False)
    fig = load_script("costaware_cost_vs_heterogeneity")
    _, ax = plt.subplots()
    fig._panel(ax, pl.DataFrame({
        "strategy": ["uniform", "optimal"], "sgd_step": ["convex"] * 2,
        "problem_cost_sigma": [0.0, 0.0], "cost_units_mean": [math.nan, 2.0],
        "cost_units_lo": [math.nan, 1.0], "cost_units_hi": [math.nan, 3.0], "n": [4, 4],
        "reached_frac": [0.5, 1.0]}), dict.fromkeys(fig.ORDER, "k"))
    assert notes.pop() == ("where a run missed eps",
                           ["uniform: 2 of 4 runs missed it, at 1 point"], False)
    _, ax = plt.subplots()
    load_script("costaware_ratios")._missed(ax, pl.DataFrame({
        "strategy": ["uniform"], "simulated_ratio": [math.nan], "optimal_ran": [False],
        "n": [8], "n_pairs": [0]}))
    assert notes.pop() == ("(no simulated ratio)", ["uniform: optimal not run, at 1 point"],
                           True)
    plt.close("all")


@pytest.mark.parametrize("damage, needle", [
    (lambda p: p.write_bytes(p.read_bytes()[:300]), "not a readable Parquet table"),
    (lambda p: pl.read_parquet(p).drop("strategy").write_parquet(p),
     "missing column(s) strategy; allowed: the tables `fastsim costaware sweep`"),
    # no row: a matplotlib traceback; costs as text: a polars one; cost sigmas as text:
    # drawn as categories in the order met, without a word
    (lambda p: pl.read_parquet(p).head(0).write_parquet(p), "no rows; allowed: the tables"),
    (lambda p: pl.read_parquet(p).with_columns(pl.col("cost_units_mean").cast(pl.String))
     .write_parquet(p), "column(s) cost_units_mean hold no numbers"),
    (lambda p: pl.read_parquet(p).with_columns(pl.col("problem_cost_sigma").cast(pl.String))
     .write_parquet(p), "column(s) problem_cost_sigma hold no numbers"),
])
def test_figures_of_a_damaged_table_is_one_line(tmp_path, capsys, damage, needle):
    """A truncated table, one without a column a script uses, with no row or with text
    where a figure draws numbers, was a traceback from inside the figure script."""
    out = tmp_path / "res"
    assert main(["costaware", "sgd", "--n", "16", "--d", "2", "--eps", "0.1",
                 "--replications", "2", "--out", str(out)]) == 0
    table = out / "costaware_sgd.summary.parquet"
    damage(table)
    capsys.readouterr()
    one_line(capsys, ["costaware", "figures", str(out)], f"{table}: ")
    one_line(capsys, ["costaware", "figures", str(out)], needle)
    assert not (out / "figures").exists()


@pytest.mark.parametrize("experiment,line,said", [
    ("grpo", 'median_len = "300"', 'median_len="300" is invalid; allowed: a number'),
    ("grpo", "median_len = true", "median_len=true is invalid; allowed: a number"),
    ("grpo", "lam = true", "lam=true is invalid; allowed: a number in [0, 1]"),
    ("grpo", "median_len = 1e308", "is invalid; allowed: a number in [1, 1e+06]"),
    ("sgd", 'eps = "0.1"', 'eps="0.1" is invalid; allowed: a number'),
    ("sgd", "cost_corr = false", "cost_corr=false is invalid; allowed: a number"),
    # a list or table where a name goes: 'unhashable type' tracebacks
    ("sgd", "kind = [1]", "kind=[1] is invalid; allowed: least_squares, logistic"),
    ("sgd", "cost_dist = {a = 1}", "cost_dist={a = 1} is invalid"),
    ("grpo", 'arms = ["uniform", ["x"]]', "starting with uniform")])
def test_a_costaware_number_given_as_text_or_a_bool_is_refused(tmp_path, capsys, experiment,
                                                               line, said):
    # float() read true as 1.0 (run silently) and "300" as 300, which reached the kernels
    # as text: a numba TypingError traceback after the work began; a median length of
    # 1e308 tokens summed to inf and the token savings read NaN
    toml = tmp_path / "s.toml"
    toml.write_text(f'experiment = "{experiment}"\nreplications = 2\n[base]\n{line}\n')
    one_line(capsys, ["costaware", "sweep", str(toml), "--out", str(tmp_path / "o")], said)
    assert not (tmp_path / "o").exists()


def test_a_huge_costaware_grid_is_refused_before_it_is_built(tmp_path):
    # 40 values on 6 axes: every one of the 4e9 points was built and validated first
    import subprocess
    import sys

    axes = ("cost_sigma", "cost_corr", "noise", "reg", "scale_sigma", "lam")
    values = ", ".join(f"0.{i:03d}" for i in range(40))
    toml = tmp_path / "huge.toml"
    toml.write_text('experiment = "sgd"\nreplications = 2\n[axes]\n'
                    + "".join(f"{a} = [{values}]\n" for a in axes))
    run = subprocess.run([sys.executable, "-m", "fastsim.cli", "costaware", "sweep", str(toml),
                          "--out", str(tmp_path / "o")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "cross to 4096000000 points; at most 10000" in run.stderr
    assert not (tmp_path / "o").exists()


def test_costaware_points_are_deduplicated_in_linear_time(tmp_path, monkeypatch):
    # an axis value given twice runs once; the check compared each point with every
    # earlier one (a list), 26 s for a 10,000-point grid before any run
    from fastsim.costaware.configs import ProblemConfig

    calls = []
    eq = ProblemConfig.__eq__
    monkeypatch.setattr(ProblemConfig, "__eq__", lambda a, b: calls.append(1) or eq(a, b))
    values = ", ".join(f"0.{i:02d}" for i in range(20))
    toml = tmp_path / "s.toml"
    toml.write_text('experiment = "sgd"\nreplications = 2\n[base]\nn = 16\n[axes]\n'
                    f"cost_sigma = [{values}]\nnoise = [{values}, 0.00]\n")
    assert len(load_costaware_sweep(toml).points()) == 400
    assert len(calls) < 2_000


def test_figures_refuse_a_sweep_axis_they_do_not_plot(tmp_path, capsys):
    """A sweep named costaware_sgd with a further axis (lam) drew two points at each
    cost sigma of every line, one over the other, and said nowhere which was which."""
    toml = tmp_path / "s.toml"
    toml.write_text('name = "costaware_sgd"\nexperiment = "sgd"\nreplications = 2\n'
                    '[base]\nn = 16\nd = 2\neps = 0.1\n'
                    '[axes]\ncost_sigma = [0.0, 1.0]\nlam = [0.0, 0.5]\n')
    out = tmp_path / "res"
    assert main(["costaware", "sweep", str(toml), "--out", str(out)]) == 0
    capsys.readouterr()
    one_line(capsys, ["costaware", "figures", str(out)], "sgd_lam varies within a plotted point")
    assert not (out / "figures").exists()


def test_figures_of_a_directory_without_costaware_results_is_refused(tmp_path, capsys):
    """It printed nothing at all, then "0 files written" with exit 0 and an empty
    DIR/figures made; `fastsim figures` and the scripts run alone refuse it, exit 2."""
    assert main(["costaware", "figures", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{tmp_path} holds no table the cost-aware figures draw (" in err
    assert list(tmp_path.iterdir()) == []


def test_figures_of_a_sweep_they_do_not_draw_names_what_they_draw(tmp_path, capsys):
    """`costaware sweep costaware_ablation --out D` then `costaware figures D` said that D
    "holds no cost-aware results; allowed: the --out of fastsim costaware sweep", which it
    is: the figures draw only the tables of the sweeps named costaware_sgd and
    costaware_grpo_sweep (and of sgd and grpo --out)."""
    (tmp_path / "costaware_ablation.summary.parquet").write_bytes(b"")
    (tmp_path / "costaware_ablation.runs.parquet").write_bytes(b"")
    assert main(["costaware", "figures", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "holds costaware_ablation.summary.parquet" in err and "no table" in err
    assert "name = \"costaware_sgd\"" in err and "costaware_grpo_sweep" in err
    assert not (tmp_path / "figures").exists()


def test_bad_sweep_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('experiment = "sgd"\n[axes]\ncost_sigma = [0.0, -1.0]\n')
    with pytest.raises(ConfigError, match="cost_sigma=-1.0"):
        load_costaware_sweep(bad)
    bad.write_text('experiment = "sgd"\n[base]\nlearning_rate = 1\n')
    with pytest.raises(ConfigError, match="learning_rate"):
        load_costaware_sweep(bad)


@pytest.mark.parametrize("text,needle", [
    ('experiment = "sgd"\naxes = 5\n', "axes=5 is invalid; allowed: a table"),
    ('experiment = "sgd"\nbase = 5\n', "base=5 is invalid; allowed: a table"),
    ('experiment = "subset"\ngamma_fracs = []\n', "gamma_fracs=[] is invalid"),
    ('experiment = "subset"\ngamma_fracs = "0.1"\n', 'gamma_fracs="0.1" is invalid'),
    # values were echoed as Python's repr (experiment=True, name=True, seed='x')
    ("experiment = true\n", 'experiment=true; allowed: "sgd", "subset", "grpo"'),
    ('name = true\nexperiment = "sgd"\n', "bad.toml: name=true is invalid"),
    ('experiment = "sgd"\nseed = "x"\n', 'bad.toml: seed="x" is invalid; allowed: an '
     'integer'),
    ('experiment = "sgd"\nreplications = true\n', "bad.toml: replications=true is invalid"),
    ('experiment = "sgd"\n[axes]\nlam = true\n', "bad.toml: axes.lam=true is invalid; allowed: a non-empty list"),
    ('experiment = "grpo"\n[base]\nbatch = true\n', "bad.toml: batch=true is invalid"),
    ('name = ".."\nexperiment = "sgd"\n', "not starting with '.'"),  # '...summary.parquet'
    # a NUL was a ValueError traceback when the outputs were written, after every run
    ('name = "a\\u0000b"\nexperiment = "sgd"\n', 'name="a\\u0000b" is invalid'),
    ('name = "a\\nb"\nexperiment = "sgd"\n', 'name="a\\nb" is invalid'),
    ('name = " "\nexperiment = "sgd"\n', 'name=" " is invalid'),  # out/ .summary.parquet
    # 10^12 draws per step: a numba SystemError traceback after the kernel tried to allocate
    ('experiment = "grpo"\n[axes]\nbatch = [32, 1000000000000]\n',
     "batch=1000000000000 is invalid; allowed: an integer from 1 to prompts*group = 128"),
    # bias budgets given to an experiment that has none were ignored, exit 0
    ('experiment = "sgd"\ngamma_fracs = [0.1]\n', 'bad.toml: gamma_fracs is given to '
     'experiment = "sgd", which has no bias budget; allowed: gamma_fracs with experiment = '
     '"subset" only'),
    ('experiment = "grpo"\ngamma_fracs = [0.1]\n', 'experiment = "grpo", which has no'),
    # a name of the user's file shows as one name, quoted: unquoted, "n steps" read as two
    ('experiment = "grpo"\n[base]\n"n steps" = 3\n', "unknown GRPO field(s) 'n steps'; "),
    ('experiment = "sgd"\n[axes]\n"lr, x" = [1]\n', "unknown field(s) 'lr, x'; "),
])
def test_a_sweep_file_of_the_wrong_shape_is_one_line(tmp_path, capsys, text, needle):
    """These were tracebacks (AttributeError, TypeError; an empty gamma_fracs a polars
    ColumnNotFoundError after the SGD runs), or a string read letter by letter."""
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    out = tmp_path / "res"
    assert main(["costaware", "sweep", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("text,needle", [
    ('experiment = "sgd"\nreplications = 2\n[axes]\nreplications = [2, 50]\n',
     "bad.toml: [axes] replications is not allowed there; allowed: replications = N at the "
     "top level"),
    ('experiment = "subset"\n[base]\nreplications = 8\n', "[base] replications is not"),
    ('experiment = "grpo"\n[base]\nseeds = 8\n', "[base] seeds is not allowed there; "
     "allowed: replications = N at the top level"),
    ('experiment = "grpo"\n[axes]\nseed = [1, 2]\n', "[axes] seed is not allowed there; "
     "allowed: seed = N at the top level"),
])
def test_replications_and_seeds_are_top_level_only(tmp_path, capsys, text, needle):
    """The loader allowed them in [base] and [axes], then every point ran with the
    top-level value: [axes] replications = [2, 50] ran both points with 64."""
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    one_line(capsys, ["costaware", "sweep", str(bad), "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text,needle", [
    # TypeErrors: 'int' object is not iterable
    ('experiment = "sgd"\n[base]\nstrategies = 3\n', "strategies=3 is invalid; allowed: a "
     "list of strategies from"),
    ('experiment = "sgd"\n[axes]\nstrategies = [true]\n', "strategies=true is invalid"),
    # the subset experiment runs SGD at the optimal distribution on each subset: the
    # strategies were ignored, exit 0
    ('experiment = "subset"\n[base]\nstrategies = ["uniform"]\n', 'strategies is not used '
     'by experiment = "subset"'),
    ('experiment = "subset"\n[axes]\nstrategies = ["uniform", "optimal"]\n',
     'strategies is not used by experiment = "subset"'),
])
def test_strategies_that_are_no_list_or_unused_are_refused(tmp_path, capsys, text, needle):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    one_line(capsys, ["costaware", "sweep", str(bad), "--out", str(tmp_path / "o")], needle)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ['experiment = "grpo"\n[base]\narms = 3\n',
                                  'experiment = "grpo"\n[axes]\narms = [true]\n'])
def test_grpo_arms_that_are_no_list_are_refused(tmp_path, capsys, text):
    """A TypeError traceback: 'int' object is not iterable."""
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    one_line(capsys, ["costaware", "sweep", str(bad), "--out", str(tmp_path / "o")],
             "starting with uniform (the baseline)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("cmd", ["sgd", "subset"])
def test_a_bad_sgd_seed_is_named_as_its_option(capsys, cmd):
    """It was named seed=..., which is --seed, the instance's seed, a valid value."""
    one_line(capsys, ["costaware", cmd, "--sgd-seed", "-1"],
             "--sgd-seed=-1 is invalid; allowed: an integer from 0 to 2^63-1")


def test_a_repeated_axis_value_runs_once(tmp_path):
    # cost_sigma = [0.5, 0.5] ran the point twice and wrote it twice; fastsim sweep runs a
    # cell once
    f = tmp_path / "s.toml"
    f.write_text('name = "dup"\nexperiment = "sgd"\nreplications = 2\n[base]\nn = 16\n'
                 'd = 2\nmax_steps = 50\nstrategies = ["optimal"]\n'
                 '[axes]\ncost_sigma = [0.5, 0.5, 1]\n')
    assert len(load_costaware_sweep(f).points()) == 2
    assert main(["costaware", "sweep", str(f), "--out", str(tmp_path / "o")]) == 0
    assert pl.read_parquet(tmp_path / "o" / "dup.summary.parquet").height == 2


def test_subset_check_n_names_the_flag_and_its_limit(capsys):
    """--check-n 40 was refused by the exact search as "method='exact' with n=40", never
    naming the flag, after --help had said only >= 1."""
    one_line(capsys, ["costaware", "subset", "--check-n", "40"],
             "--check-n=40 is invalid; allowed: an integer from 1 to 22")
    with pytest.raises(SystemExit):
        main(["costaware", "subset", "--help"])
    assert "1 to 22 (default: 14)" in " ".join(capsys.readouterr().out.split())


def test_an_unknown_sweep_lists_the_cost_aware_ones(tmp_path, capsys):
    # it listed every shipped sweep (headline, noise, ...), which this command refuses
    assert main(["costaware", "sweep", "nosuch", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "one of costaware_ablation, costaware_grpo, costaware_pareto" in err, err
    assert "headline" not in err and len(err.strip().splitlines()) == 1


def test_an_axis_of_single_strategies_runs_each_alone(tmp_path, capsys):
    # strategies = ["uniform"] was read letter by letter ('u' is not a strategy), and a
    # run without the ratios' baseline (optimal) was a polars traceback after the SGD runs
    f = tmp_path / "s.toml"
    f.write_text('name = "one"\nexperiment = "sgd"\nreplications = 4\n[base]\nn = 16\nd = 2\n'
                 'eps = 0.1\n[axes]\nstrategies = ["uniform", "optimal"]\n')
    assert main(["costaware", "sweep", str(f), "--out", str(tmp_path / "o")]) == 0
    t = pl.read_parquet(tmp_path / "o" / "one.summary.parquet")
    assert t["strategy"].to_list() == ["uniform", "optimal"]
    uni = t.row(0, named=True)  # predicted against optimal's J; no optimal runs to pair with
    assert uni["predicted_ratio"] > 1 and uni["n_pairs"] == 0 and math.isnan(uni["simulated_ratio"])
    assert t.row(1, named=True)["simulated_ratio"] == 1.0


SGD_TINY = ["costaware", "sgd", "--n", "16", "--d", "2", "--eps", "0.1", "--replications", "4"]


def test_sgd_table_shows_n_the_reached_interval_and_the_median(capsys):
    assert main(SGD_TINY) == 0
    header = capsys.readouterr().out
    for col in ("┆ n ┆", "reached_lo", "reached_hi", "cost_units_median"):
        assert col in header, col


@pytest.mark.parametrize("cmd", [SGD_TINY, ["costaware", "grpo", "--seeds", "2", "--n-steps", "5",
                                            "--n-train", "8", "--n-test", "8"]])
def test_an_unwritable_output_name_is_refused_before_any_work(tmp_path, capsys, cmd):
    out = tmp_path / "res"
    stem = cmd[1]
    (out / f"costaware_{stem}.runs.parquet").mkdir(parents=True)  # the last file written
    assert main(cmd + ["--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "runs.parquet: is a directory" in captured.err
    assert captured.out == ""  # nothing ran
    assert sorted(p.name for p in out.iterdir()) == [f"costaware_{stem}.runs.parquet"]


def test_sgd_outputs_are_written_all_or_none(tmp_path, monkeypatch):
    import pyarrow.parquet as pq  # every Parquet file is written by pyarrow's writer

    real = pq.write_table

    def failing(table, where, *args, **kwargs):  # the runs table fails, the summary does not
        if "runs.parquet" in str(where):
            raise OSError(28, "No space left on device")
        return real(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", failing)
    out = tmp_path / "res"
    assert main(SGD_TINY + ["--out", str(out)]) == 2
    assert not out.exists() or list(out.iterdir()) == []


def test_trl_gradnorm_checks_its_output_before_importing_trl(tmp_path, monkeypatch, capsys):
    """Its default directory too: the table was written only after minutes of training."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # as if the extra were installed
                        lambda name, *a: object() if name in ("trl", "datasets", "torch")
                        else real(name, *a))
    monkeypatch.chdir(tmp_path)
    Path("results").mkdir()
    Path("results/costaware_trl").write_text("a file where the default directory goes")
    assert main(["costaware", "trl-gradnorm"]) == 2
    assert "costaware_trl: exists and is not a directory" in capsys.readouterr().err


def test_trl_gradnorm_refuses_a_seed_transformers_cannot_take(capsys):
    """--seed 4294967296 passed '>= 0' and reached transformers' set_seed inside the
    Trainer ("Seed must be between 0 and 2**32 - 1", a traceback); it is refused first,
    before the extra is even looked for."""
    assert main(["costaware", "trl-gradnorm", "--seed", str(2**32)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--seed=4294967296 is invalid; allowed: an integer from 0 to 4,294,967,295" in err
    assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("option,bound", [("--batches", "1,000"), ("--train-steps", "10,000")])
def test_trl_gradnorm_bounds_its_work(capsys, option, bound):
    """--batches 10**12 and --train-steps 10**12 were taken: hours of training per
    thousand steps on CPU, a typo an endless run; refused first, before the extra is
    looked for."""
    assert main(["costaware", "trl-gradnorm", option, str(10**12)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{option}=1000000000000 is invalid; allowed: an integer from " in err, err
    assert f" to {bound} (" in err and len(err.splitlines()) == 1, err


def test_a_grpo_batch_above_the_step_s_responses_is_one_line(capsys):
    # --batch 10^8 (2 seeds, 2 steps of 128 responses) ran 170 s at 1.8 GB; 10^12 was a
    # numba SystemError traceback
    assert main(["costaware", "grpo", "--seeds", "2", "--n-steps", "2", "--eval-every", "1",
                 "--batch", "100000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert ("--batch=100000000 is invalid; allowed: an integer from 1 to --prompts x --group = "
            "128" in err)
    assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv,said", [
    (["ratios", "--lams", "0,0.0"], "--lams='0,0.0' is invalid; allowed: uniform mixing "
     "weights in [0, 1], each value once"),
    (["subset", "--gammas", "0.1,0.1"], "each value once")])
def test_a_costaware_value_given_twice_is_refused(tmp_path, capsys, argv, said):
    # each value is a row of the table: the same row was written twice
    out = tmp_path / "o.parquet"
    one_line(capsys, ["costaware", *argv, "--out", str(out)], said)
    assert not out.exists()


def test_a_costaware_sweeps_gamma_fraction_given_twice_is_refused(tmp_path, capsys):
    toml = tmp_path / "s.toml"
    toml.write_text('experiment = "subset"\nreplications = 2\ngamma_fracs = [0.1, 0.1]\n')
    one_line(capsys, ["costaware", "sweep", str(toml), "--out", str(tmp_path / "o")],
             "gamma_fracs=[0.1, 0.1] is invalid; allowed: each fraction once")
    assert not (tmp_path / "o").exists()


def test_figures_of_a_file_say_it_is_not_a_directory(tmp_path, capsys):
    """`costaware figures /dev/zero` (or a file) said the path "does not exist"."""
    (tmp_path / "afile").write_text("x")
    allowed = "; allowed: the --out of fastsim costaware sweep, sgd or grpo"
    one_line(capsys, ["costaware", "figures", str(tmp_path / "afile")],
             f"results directory '{tmp_path / 'afile'}' is not a directory{allowed}")
    # a mistyped DIR also says what the command takes
    one_line(capsys, ["costaware", "figures", str(tmp_path / "typo")],
             f"results directory '{tmp_path / 'typo'}' does not exist{allowed}")


def test_importing_the_trl_module_without_its_extra_names_the_extra(monkeypatch):
    """`from fastsim.costaware.trl import CostAware` without TRL ended in "No module named
    'torch'", which did not say that `pip install 'fastsim[trl]'` provides it."""
    import importlib
    import sys

    monkeypatch.delitem(sys.modules, "fastsim.costaware.trl", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed
    with pytest.raises(ImportError, match=r"^fastsim\.costaware\.trl needs torch, which is "
                       r"not installed: pip install 'fastsim\[trl\]'"):
        importlib.import_module("fastsim.costaware.trl")


def test_no_progress_silences_the_bars_of_every_costaware_run(tmp_path, capsys):
    """`fastsim sweep` and `reproduce` took --no-progress; the cost-aware commands with a bar
    refused it, so the loop of docs/costaware.md logged to a file was bar redraws."""
    toml = tmp_path / "tiny.toml"
    toml.write_text('experiment = "sgd"\nreplications = 2\n[base]\nn = 16\nd = 2\neps = 0.1\n'
                    '[axes]\ncost_sigma = [0.0, 1.0]\n')
    small = ["--n", "16", "--d", "2", "--eps", "0.1", "--replications", "2"]
    for argv in (["sweep", str(toml), "--out", str(tmp_path / "o")], ["sgd", *small],
                 ["subset", *small, "--check-instances", "1", "--check-n", "4"],
                 ["grpo", "--seeds", "2", "--n-steps", "10", "--n-train", "8", "--n-test", "8"]):
        capsys.readouterr()
        assert main(["costaware", *argv, "--no-progress"]) == 0, argv
        assert "it/s" not in capsys.readouterr().err, argv
    assert main(["costaware", "sgd", *small]) == 0  # the bar the option silences
    assert "it/s" in capsys.readouterr().err


def test_ratios_says_when_it_compiles_first(monkeypatch, capsys):
    """`costaware ratios`, the one cost-aware command without a bar, sat 8-10 s in silence
    on its first run while numba compiled its kernels."""
    import fastsim.compile_notice as notice
    from fastsim.costaware.cli import RATIO_KERNELS
    from fastsim.kernels.jit import CACHE, UNCACHED

    argv = ["costaware", "ratios", "--n", "16", "--d", "2"]
    assert main(argv) == 0
    # the names are the kernels' own: once they ran, they are found in the cache
    assert notice.kernels_cached(*RATIO_KERNELS) == (CACHE and not UNCACHED)
    capsys.readouterr()
    monkeypatch.setattr(notice, "kernels_cached", lambda *names: False)  # as on a first run
    assert main(argv) == 0
    assert "compiling the cost-aware kernels (about 5-20 s" in capsys.readouterr().err
    monkeypatch.setattr(notice, "kernels_cached", lambda *names: True)
    assert main(argv) == 0
    assert "compiling" not in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--kind", "foo"], ["--n", "1"], ["--cost-corr", "2"]])
def test_ratios_refuses_a_bad_value_before_saying_it_compiles(monkeypatch, capsys, bad):
    """On a first run `costaware ratios --kind foo` said it was compiling the kernels, then
    refused the value: two lines, the first about work that never ran."""
    import fastsim.compile_notice as notice

    monkeypatch.setattr(notice, "kernels_cached", lambda *names: False)  # as on a first run
    assert main(["costaware", "ratios", *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert "compiling" not in err and len(err.splitlines()) == 1, err


def test_the_sweep_api_refuses_an_empty_or_missing_path(tmp_path, monkeypatch):
    """run_costaware_sweep(file, "") wrote its tables into the current directory
    (Path('') is '.'), as `fastsim costaware sweep --out ''` no longer does; None was a
    TypeError, and progress='no' was truthy."""
    from fastsim.costaware.sweep import run_costaware_sweep

    p = tmp_path / "s.toml"
    p.write_text('name = "t"\nexperiment = "subset"\nreplications = 2\n[base]\nn = 16\n')
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for call, said in ((lambda: run_costaware_sweep(p, ""), "out_dir='' is invalid"),
                       (lambda: run_costaware_sweep(p, None), "out_dir=None is invalid"),
                       (lambda: run_costaware_sweep(p, tmp_path / "o", progress="no"),
                        "progress='no' is invalid"),
                       (lambda: load_costaware_sweep(None), "path=None is invalid")):
        with pytest.raises(ConfigError, match=said):
            call()
    assert list(here.iterdir()) == [] and not (tmp_path / "o").exists()


def test_the_sweep_api_names_its_argument_where_the_command_names_its_option(tmp_path, capsys):
    """run_costaware_sweep(file, FILE) said '--out FILE: exists and is not a directory', an
    option the Python call has not; the command still says --out."""
    from fastsim.costaware.sweep import run_costaware_sweep

    p = tmp_path / "s.toml"
    p.write_text('name = "t"\nexperiment = "subset"\nreplications = 2\n[base]\nn = 16\n')
    taken = tmp_path / "a_file"
    taken.write_text("")
    with pytest.raises(ConfigError, match=r"^out_dir=\S*a_file: exists and is not a directory"):
        run_costaware_sweep(p, taken, progress=False)
    one_line(capsys, ["costaware", "sweep", str(p), "--out", str(taken)],
             f"--out {taken}: exists and is not a directory")


@pytest.mark.parametrize("change", ["directory moved", "lock deleted"])
def test_a_sweep_whose_lock_changed_mid_run_writes_nothing(tmp_path, capsys, monkeypatch,
                                                            change):
    """costaware sweep never looked at its lock again after taking it: with --out moved
    mid-run it made a new, unlocked directory at the old path and wrote its tables there;
    with sweep.lock deleted, a second sweep could lock a new one and write beside it.
    Now it stops before writing, in one line (as fastsim sweep does)."""
    import fastsim.costaware.sweep as cs

    toml = tmp_path / "s.toml"
    toml.write_text('experiment = "sgd"\nreplications = 2\n[base]\nn = 16\nd = 2\n')
    out = tmp_path / "res"
    real = cs.run_sgd

    def run_then_change(*args, **kwargs):
        if change == "lock deleted":
            (out / "sweep.lock").unlink()
        else:
            out.rename(tmp_path / "moved")
        return real(*args, **kwargs)

    monkeypatch.setattr(cs, "run_sgd", run_then_change)
    assert main(["costaware", "sweep", str(toml), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is no longer this process's lock" in err, err
    written = out if change == "lock deleted" else tmp_path / "moved"
    assert not list(written.glob("*.parquet")) and (change == "lock deleted" or not out.exists())


@pytest.mark.parametrize("cls,field,given", [
    ("ProblemConfig", "cost_corr", -0.0), ("ProblemConfig", "reg", 1), ("SGDConfig", "lam", -0.0),
    ("GRPOConfig", "floor", -0.0), ("GRPOConfig", "lr", 1)])
def test_a_float_setting_of_minus_zero_or_an_int_is_stored_as_the_float(cls, field, given):
    """--cost-corr -0.0 or --lam -0.0 ran with -0.0, written to the tables as problem_cost_corr
    -0.0 beside another run's 0.0 (two values of one setting) and printed as -0.0000; an
    int (reg=1) stayed an int in the config."""
    from fastsim.costaware import configs

    value = getattr(getattr(configs, cls)(**{field: given}), field)
    assert type(value) is float and value == given and math.copysign(1.0, value) == 1.0


def test_a_uniform_weight_of_minus_zero_is_zero(tmp_path, capsys):
    assert main(["costaware", "ratios", "--n", "16", "--d", "2", "--lams=-0,0.5",
                 "--out", str(tmp_path)]) == 0
    lams = pl.read_parquet(tmp_path / "costaware_ratios.parquet")["lam"].unique().to_list()
    assert sorted(lams) == [0.0, 0.5] and all(math.copysign(1.0, x) == 1.0 for x in lams)
    assert "-0.0000" not in capsys.readouterr().out


@pytest.mark.parametrize("n_seeds", [float("nan"), None])
def test_figures_of_a_nan_or_null_seed_count_is_one_line(tmp_path, capsys, n_seeds):
    """A NaN or null n_seeds in the GRPO curves was an int() traceback from inside the
    figure script (its note says how many seeds), after the figure was begun."""
    out = tmp_path / "res"
    out.mkdir()
    table = out / "costaware_grpo.curves.parquet"
    pl.DataFrame({"arm": ["uniform", "cost_aware"], "eval": [0, 0], "tokens_mean": [1e6, 1e6],
                  "accuracy_mean": [0.5, 0.6], "accuracy_lo": [0.4, 0.5],
                  "accuracy_hi": [0.6, 0.7], "n_seeds": [n_seeds, n_seeds]},
                 schema_overrides={"n_seeds": pl.Float64}).write_parquet(table)
    one_line(capsys, ["costaware", "figures", str(out)],
             f"{table}: column(s) n_seeds hold a NaN or null count")
    assert not (out / "figures").exists()


def test_ratios_shows_the_newton_steps_of_a_large_instance(monkeypatch, capsys):
    """`costaware ratios --d 10000` ran for minutes to hours in silence: each Newton step
    of the instance's solve is O(n d^2 + d^3).  A large instance (here: any, by the
    threshold) shows its steps on a bar, and --no-progress silences it; the optimum is
    optimum_nb's to the last bit."""
    import numpy as np

    import fastsim.costaware.sgd as sgd
    from fastsim.kernels import costaware_sgd as nbs

    argv = ["costaware", "ratios", "--kind", "logistic", "--n", "16", "--d", "3"]
    assert main(argv) == 0
    assert "Newton" not in capsys.readouterr().err  # a small instance: no bar
    monkeypatch.setattr(sgd, "BAR_FROM_WORK", 0)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "solving the instance (n=16, d=3): Newton steps, at most 100" in err, err
    assert main([*argv, "--no-progress"]) == 0
    assert "Newton" not in capsys.readouterr().err
    for kind in ("least_squares", "logistic"):
        pr = sgd.make_problem(sgd.ProblemConfig(kind=kind, n=40, d=6), progress=True)
        exact = nbs.optimum_nb(pr.code, pr.A, pr.b, pr.config.reg, np.ones(40))
        assert pr.x_star.tobytes() == exact.tobytes()


def test_a_sweep_interrupted_before_its_tables_leaves_nothing_it_made(tmp_path, monkeypatch):
    """`costaware sweep FILE --out NEW` interrupted (Ctrl-C) during its points left NEW
    holding a blank sweep.lock, a sweep's directory to every later look, though it said
    "nothing half-written is left".  A directory that was there before stays."""
    import fastsim.costaware.sweep as S

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(S, "_point_tables", interrupted)
    toml = tmp_path / "costaware_sgd.toml"
    toml.write_text('name = "costaware_sgd"\nexperiment = "sgd"\n[axes]\nn = [16]\n')
    assert main(["costaware", "sweep", str(toml), "--out", str(tmp_path / "A" / "NEW")]) != 0
    assert not (tmp_path / "A").exists()
    (tmp_path / "mine").mkdir()
    assert main(["costaware", "sweep", str(toml), "--out", str(tmp_path / "mine")]) != 0
    assert (tmp_path / "mine").is_dir() and not list((tmp_path / "mine").iterdir())


def test_a_failed_sweep_into_a_sweep_directory_leaves_no_lock_file(tmp_path, monkeypatch):
    """`run_costaware_sweep(FILE, DIR)`, DIR holding a fastsim sweep.json and no sweep.lock,
    refused or interrupted during its points left DIR holding a blank sweep.lock: whether
    the run made the file was asked after ``hold_sweep_dirs`` had made it.  A lock file
    there before is kept."""
    import json

    import fastsim.costaware.sweep as S
    from fastsim.costaware import run_costaware_sweep

    toml = tmp_path / "costaware_sgd.toml"
    toml.write_text('name = "costaware_sgd"\nexperiment = "sgd"\n[axes]\nn = [16]\n')
    out = tmp_path / "D"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"format": 3, "grid_hash": "0" * 64}))
    for failure in (ConfigError("refused"), KeyboardInterrupt()):
        def fails(*args, failure=failure, **kwargs):
            raise failure

        monkeypatch.setattr(S, "_point_tables", fails)
        with pytest.raises(type(failure)):
            run_costaware_sweep(toml, out, progress=False)
        assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]
    (out / "sweep.lock").write_text("")  # there before: kept
    with pytest.raises(KeyboardInterrupt):
        run_costaware_sweep(toml, out, progress=False)
    assert (out / "sweep.lock").exists()


@pytest.mark.parametrize("reps, said", [
    ("2", "(0 to inf: too few runs for a 95% order-statistic interval, which needs at least "
          "6, and 2 ran; NaN"),
    ("6", "(inf: the cap censors the bound; NaN")])
def test_sgd_says_why_its_median_interval_is_unbounded(capsys, reps, said):
    """With 2 replications every median interval read 0 to inf, and the header blamed inf
    on the cap, which no run hit: no order statistic of fewer than 6 runs bounds the
    median.  With enough runs the cap is the one reason left."""
    assert main(["costaware", "sgd", "--n", "2", "--d", "1", "--eps", "1", "--replications",
                 reps, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert said in out, out


def test_figures_refuse_values_the_writers_never_write(tmp_path, capsys):
    """A summary edited to inf or NaN ratios was drawn without a word (the cost-aware
    tables carry no checksums): an infinity in a column a figure reads, or NaN where the
    writer always writes a number, is one line naming the file and column.  NaN where no
    estimate exists (a ratio of runs that missed eps) is still drawn as a gap."""
    out = tmp_path / "res"
    assert main(["costaware", "sgd", "--n", "16", "--d", "2", "--eps", "0.1", "--replications",
                 "2", "--no-progress", "--out", str(out)]) == 0
    path = out / "costaware_sgd.summary.parquet"
    good = pl.read_parquet(path)
    for column, value, said in (("simulated_ratio", math.inf, "inf"),
                                ("simulated_ratio_hi", -math.inf, "inf"),
                                ("predicted_ratio", math.nan, "NaN")):
        good.with_columns(pl.when(pl.col("strategy") == "uniform").then(value)
                          .otherwise(pl.col(column)).alias(column)).write_parquet(path)
        one_line(capsys, ["costaware", "figures", str(out)],
                 f"{path}: column {column} holds {said}, which fastsim costaware never writes")
        assert not (out / "figures").exists()
    good.with_columns(simulated_ratio=math.nan).write_parquet(path)
    assert main(["costaware", "figures", str(out)]) == 0


def test_subset_prints_each_budget_as_given(capsys):
    """A budget of 0.999999999 was printed 1.0000, a budget the command refuses (each is
    below 1): the budgets are printed in full, the results to 4 decimals."""
    assert main(["costaware", "subset", "--gammas", "0.999999999,0.5", "--check-instances",
                 "2", "--check-n", "6", "--replications", "2", "--no-progress"]) == 0
    rows = [ln.split("┆")[0].strip("│ ") for ln in capsys.readouterr().out.splitlines()
            if "┆ greedy ┆" in ln]
    assert rows == ["0.999999999", "0.5"], rows


def test_an_axis_some_points_do_not_read_runs_them_once(tmp_path, capsys):
    """cost_dist = [lognormal, pareto] crossed with cost_alpha = [2, 3] ran the lognormal
    points twice, identical results under two labels (lognormal costs do not read
    cost_alpha).  They run once, cost_alpha at its default there (as fastsim sweep resets
    k at a stop_at cell), and one note says so before any work."""
    import warnings

    import fastsim.costaware as ca
    from fastsim.errors import InertSettingWarning

    p = tmp_path / "c.toml"
    p.write_text('experiment = "sgd"\nreplications = 4\n[base]\nn = 16\nd = 2\nmax_steps = 200\n'
                 'strategies = ["uniform"]\n[axes]\ncost_dist = ["lognormal", "pareto"]\n'
                 "cost_alpha = [2.0, 3.0]\n")
    spec = load_costaware_sweep(p)
    assert [(pt["cost_dist"], pt["cost_alpha"]) for pt in spec.points()] == [
        ("lognormal", 2.0), ("pareto", 2.0), ("pareto", 3.0)]
    note = ('c.toml: cost_alpha applies to cost_dist = "pareto" only: a point without it runs '
            "once, not once per cost_alpha, its rows showing cost_alpha's default (1.5); 3 of "
            "4 points run")
    assert spec.notes == (note,)
    assert main(["costaware", "sweep", str(p), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 0
    assert [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")] == [
        f"note: {note}"]
    rows = pl.read_parquet(tmp_path / "o" / "c.summary.parquet")
    assert rows.select("problem_cost_dist", "problem_cost_alpha").rows() == [
        ("lognormal", 1.5), ("pareto", 2.0), ("pareto", 3.0)]
    with pytest.warns(InertSettingWarning, match="cost_alpha applies to"):
        ca.run_costaware_sweep(p, tmp_path / "api", progress=False)
    p.write_text(p.read_text().replace('["lognormal", "pareto"]', '["pareto"]'))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InertSettingWarning)
        assert load_costaware_sweep(p).notes == ()


def test_a_sweep_whose_tables_would_not_fit_in_memory_is_refused_before_any_point(
        tmp_path, capsys, monkeypatch):
    """Every point's runs are kept until the end, to be written all or none: replications
    = 1000000 over 20 points grew by about 0.7 GiB a point until the process was killed, or
    aborted inside polars under a memory limit with --out left holding a blank sweep.lock.
    Refused up front, naming the largest replications that fits, nothing made."""
    import fastsim.memory
    from fastsim.costaware import run_costaware_sweep

    monkeypatch.setattr(fastsim.memory, "available_bytes", lambda: 4 << 30)
    ran = []
    monkeypatch.setattr("fastsim.costaware.sweep.run_sgd", lambda *a, **k: ran.append(1))
    sigmas = ", ".join(str(i / 10) for i in range(20))
    f = tmp_path / "big.toml"
    f.write_text('experiment = "sgd"\nreplications = 1000000\n[base]\nn = 16\nd = 2\n'
                 f"[axes]\ncost_sigma = [{sigmas}]\n")
    one_line(capsys, ["costaware", "sweep", str(f), "--out", str(tmp_path / "o")],
             "big.toml: replications 1000000 with 80 SGD runs a replication over 20 points "
             "needs about 40.5 GiB of memory, 4.0 GiB available; largest feasible: "
             "replications 78951")
    g = tmp_path / "grpo.toml"  # GRPO keeps an evaluation row per seed, arm and evaluation
    g.write_text('experiment = "grpo"\nreplications = 100000\n[base]\nn_steps = 100\n'
                 "[axes]\nlr = [0.1, 0.2, 0.3]\n")
    with pytest.raises(ConfigError, match=r"^grpo\.toml: replications 100000 with 246 "
                       r"evaluations a seed over 3 points needs about .* GiB of memory, 4\.0 "
                       r"GiB available; largest feasible: replications \d+$"):
        run_costaware_sweep(g, tmp_path / "o")
    monkeypatch.setattr(fastsim.memory, "available_bytes", lambda: 1 << 14)
    f.write_text(f.read_text().replace("1000000", "2"))
    one_line(capsys, ["costaware", "sweep", str(f), "--out", str(tmp_path / "o")],
             "replications 2 with 80 SGD runs a replication over 20 points needs about 0.0 "
             "GiB of memory, 0.0 GiB available; even 2 do not fit; allowed: fewer points")
    assert not ran and not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", [
    'experiment = "sgd"\n[base]\nn = 16\nd = 2\neps = 0.1\n[axes]\ncost_sigma = [0.0, 1.0]\n',
    'experiment = "subset"\ngamma_fracs = [0.0, 0.1]\n[base]\nn = 16\nd = 2\neps = 0.1\n'
    '[axes]\ncost_corr = [0.0, 0.5]\n',
    'experiment = "grpo"\n[base]\nn_steps = 10\nn_train = 8\nn_test = 8\n[axes]\n'
    'lr = [0.1, 0.2]\n'], ids=["sgd", "subset", "grpo"])
def test_the_memory_check_counts_the_tables_a_sweep_keeps(tmp_path, text):
    """``check_tables_fit`` sizes the kept tables as ``TABLE_COLUMNS`` columns on
    ``_rows_per_replication`` rows a replication and point: tied here to the tables a sweep
    keeps, so that a column or a row added to them cannot outgrow the check unseen.  Only
    the runs grow with replications; the summaries (and GRPO's curve summary) are a few rows
    a point."""
    from fastsim.costaware.sweep import (TABLE_COLUMNS, _point_tables, _rows_per_replication,
                                         load_costaware_sweep)

    heights = {}
    for replications in (2, 4):
        f = tmp_path / f"r{replications}.toml"
        f.write_text(f"replications = {replications}\n{text}")
        spec = load_costaware_sweep(f)
        tables = {kind: pl.concat(parts, how="diagonal_relaxed")
                  for kind, parts in _point_tables(spec, False).items() if parts}
        rows = replications * sum(_rows_per_replication(spec, p) for p in spec.points())
        assert 0 < tables["runs"].height <= rows
        assert tables["runs"].width <= TABLE_COLUMNS
        heights[replications] = {kind: t.height for kind, t in tables.items()}
    assert heights[4]["runs"] == 2 * heights[2]["runs"]
    assert {k: v for k, v in heights[4].items() if k != "runs"} == \
        {k: v for k, v in heights[2].items() if k != "runs"}
