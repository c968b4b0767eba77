"""The pre-registered confirmation of goal 3 (``fastsim detectors --confirm``): it runs the
plan's one comparison, counts it right, and refuses a trace set that is not the plan's."""
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fastsim import detectors as det
from fastsim import detectors_confirm as cf
from fastsim.cli import main
from fastsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PLAN = """
[candidate]
detector = "cusum"
params = {{ drift = 0.0, h = 1.0, sigma0 = 0.05 }}
[baseline]
detector = "evalstop"
params = {{ k = 2 }}
[traces]
seeds_first = {first}
seeds_last = {last}
exploration_seeds = [0, 1]
world_seed = 0
n_runs = {n_runs}
n_evals = 12
[test]
primary = "fpr"
test = "mcnemar_exact"
alternative = "{alternative}"
alpha = 0.05
recall_rule = "candidate_recall >= baseline_recall"
"""


def _traces(seeds, runs_per_seed=20, n_evals=12, rng_seed=0) -> pl.DataFrame:
    """A trace table as ``fastsim traces toy-rlhf`` writes it: noisy rising curves, a third
    of them falling after a peak (hacking)."""
    rng = np.random.default_rng(rng_seed)
    u = np.arange(n_evals) / (n_evals - 1)
    rows = []
    for s in seeds:
        for r in range(runs_per_seed):
            hacking = r % 3 == 0
            gold = np.sqrt(u) if not hacking else 2 * u * (1 - u)
            rows.append(pl.DataFrame({
                "job_id": f"s{s}_r{r}", "step": np.arange(n_evals) * 15,
                "score": gold + rng.normal(0, 0.05, n_evals), "truth_gold": gold,
                "truth_hacking": hacking, "seed": s}))
    return pl.concat(rows)


def _plan(tmp_path, first=10, last=13, n_runs=80, alternative="two-sided") -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(PLAN.format(first=first, last=last, n_runs=n_runs, alternative=alternative))
    return p


def test_confirm_counts_the_declared_comparison(tmp_path):
    traces = _traces(range(10, 14))
    path = tmp_path / "traces.parquet"
    traces.write_parquet(path)
    doc = tmp_path / "doc.md"
    doc.write_text(f"head\n{cf.START}\nOLD-BLOCK\n{cf.END}\ntail\n")
    out = tmp_path / "o"
    assert main(["detectors", "--confirm", str(_plan(tmp_path)), "--traces", str(path),
                 "--out", str(out), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("head\n") and text.endswith("tail\n") and "OLD-BLOCK" not in text
    assert (out / "confirm.md").read_text() in text
    # the same comparison by hand
    a = det.trace_arrays(traces)
    every = np.ones((1, 80), np.bool_)
    c = det.triggers("cusum", {"drift": 0.0, "h": 1.0, "sigma0": 0.05}, a["score"][None], every)[0][0] > 0
    b = det.triggers("evalstop", {"k": 2}, a["score"][None], every)[0][0] > 0
    h = ~a["hacking"]
    r = cf.confirm(a, cf.read_plan(_plan(tmp_path)))
    assert (r["only_baseline"], r["only_candidate"]) == ((b & ~c & h).sum(), (c & ~b & h).sum())
    assert r["only_baseline"] + r["only_candidate"] > 0  # not vacuous
    assert r["d_fpr"].mean == pytest.approx(c[h].mean() - b[h].mean())
    assert r["candidate_fpr"].mean == pytest.approx(c[h].mean())
    assert r["n_healthy"] == h.sum() and r["n_seeds"] == 4
    assert r["holds"] == (r["p"] < 0.05 and r["d_fpr"].mean < 0 and c[~h].mean() >= b[~h].mean())
    assert f"{r['only_baseline']} / {r['only_candidate']}" in text
    # the plan's t intervals over runs ignore the seeds the runs share (4 here): the table
    # says so on each, and which interval to read
    assert text.count("t interval over runs, runs taken as independent") == 2
    assert "narrower than 95%" in text and "seed-clustered FPR change is the one to read" in text


def test_confirm_refuses_its_outputs_before_the_comparison(tmp_path, capsys, monkeypatch):
    """An --out that is a file was refused only when confirm.md was written, after the
    comparison ('cannot write OUT/confirm.md (File exists)'); a --doc that is OUT/confirm.md
    was written over by the doc's text, or the other way round, without a word."""
    path = tmp_path / "traces.parquet"
    _traces(range(10, 14)).write_parquet(path)
    monkeypatch.setattr(cf, "confirm", lambda *a: pytest.fail("the comparison ran"))
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    argv = ["detectors", "--confirm", str(_plan(tmp_path)), "--traces", str(path)]
    assert main([*argv, "--out", str(a_file)]) == 2
    assert "--out " in capsys.readouterr().err and a_file.read_text() == "kept"
    out = tmp_path / "o"
    out.mkdir()
    doc = out / "confirm.md"
    doc.write_text(f"head\n{cf.START}\n{cf.END}\n")
    assert main([*argv, "--out", str(out), "--doc", str(doc)]) == 2
    assert "--doc " + str(doc) + ": the same file as --out's confirm.md" in capsys.readouterr().err


def test_a_candidate_equal_to_the_baseline_confirms_nothing(tmp_path):
    plan = cf.read_plan(_plan(tmp_path))
    plan["candidate"] = plan["baseline"]
    r = cf.confirm(det.trace_arrays(_traces(range(10, 14))), plan)
    assert r["p"] == 1.0 and r["recall_holds"] and not r["holds"]


def test_refuses_traces_that_are_not_the_plans(tmp_path, capsys):
    plan = _plan(tmp_path)
    for seeds, why in ((range(0, 4), "exploration seeds"), (range(10, 13), "not the plan's")):
        path = tmp_path / "traces.parquet"
        _traces(seeds).write_parquet(path)
        out = tmp_path / "o"
        assert main(["detectors", "--confirm", str(plan), "--traces", str(path), "--out", str(out)]) == 2
        assert why in capsys.readouterr().err
        assert not out.exists()


def test_refuses_traces_from_another_world(tmp_path, capsys):
    from fastsim.io import table_writer
    from fastsim.replay.traces import ToyRLHFConfig, config_metadata

    plan, path, out = _plan(tmp_path), tmp_path / "traces.parquet", tmp_path / "o"
    traces = _traces(range(10, 14))
    table_writer(traces, path, config_metadata(ToyRLHFConfig(world_seed=5)))(path)
    assert main(["detectors", "--confirm", str(plan), "--traces", str(path), "--out", str(out)]) == 2
    assert "world_seed 5; allowed: the plan's world_seed 0" in capsys.readouterr().err
    assert not out.exists()
    table_writer(traces, path, config_metadata(ToyRLHFConfig(world_seed=0)))(path)
    assert main(["detectors", "--confirm", str(plan), "--traces", str(path), "--out", str(out)]) == 0
    assert "generated with world_seed 0" in capsys.readouterr().err


@pytest.mark.parametrize("kw, field", [({"first": 0}, "overlap"), ({"alternative": "less"}, "alternative"),
                                       # a set of 10^11 seeds was built, for minutes, in memory
                                       ({"last": 10**11}, "seeds for n_runs = 80; allowed: at most one")])
def test_refuses_a_plan_off_the_declared_design(tmp_path, kw, field):
    with pytest.raises(ConfigError, match=field):
        cf.read_plan(_plan(tmp_path, **kw))


def test_a_bad_plan_value_is_echoed_as_the_file_writes_it(tmp_path):
    """'[test] alternative = 'less'; allowed: 'two-sided'' and '[traces] n_runs = True' were
    Python's repr; a missing field read '= None'."""
    p = _plan(tmp_path, alternative="less")
    with pytest.raises(ConfigError, match='alternative = "less"; allowed: "two-sided"'):
        cf.read_plan(p)
    p.write_text(p.read_text().replace('alternative = "less"', 'alternative = "two-sided"')
                 .replace("n_runs = 80", "n_runs = true").replace("world_seed = 0\n", ""))
    with pytest.raises(ConfigError, match=r"\[traces\] n_runs = true; allowed: an integer"):
        cf.read_plan(p)
    p.write_text(p.read_text().replace("n_runs = true", "n_runs = 80"))
    with pytest.raises(ConfigError, match=r"\[traces\] world_seed is missing; allowed"):
        cf.read_plan(p)


@pytest.mark.parametrize("line, said", [
    ("n_runs = -80", "n_runs = -80; allowed: an integer from 1 to 1000000"),
    ("n_runs = 0", "n_runs = 0; allowed: an integer from 1 to 1000000"),
    ("n_evals = 0", "n_evals = 0; allowed: an integer >= 2"),
    ("n_evals = -12", "n_evals = -12; allowed: an integer >= 2"),
    ("world_seed = -1", "world_seed = -1; allowed: an integer from 0 to 2^64-1"),
    ("n_runs = 100000000000", "n_runs = 100000000000; allowed: an integer from 1 to 1000000")])
def test_plan_counts_and_world_seed_are_in_range(tmp_path, line, said):
    """n_runs = -80 was refused as '4 seeds for n_runs = -80' (no word on the range);
    n_evals = 0 and world_seed = -1 were accepted, and no trace set could ever match.
    n_runs = 10^11 let seeds_last = 10^11 through, whose set of seeds was built for
    minutes, in memory, before any trace was read."""
    p = _plan(tmp_path)
    key = line.split(" = ")[0]
    text = re.sub(rf"(?m)^{key} = .*$", line, p.read_text())
    p.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"[traces] {said}")):
        cf.read_plan(p)


@pytest.mark.parametrize("seeds, said", [("[[0], 1]", "[0]"), ("[true, 1]", "true"),
                                         ('["0"]', '"0"'), ("[1.5]", "1.5"), ("[-1]", "-1")])
def test_exploration_seeds_are_integers(tmp_path, seeds, said):
    """[[0], 1] was TypeError: unhashable type: 'list'; [true] was read as seed 1."""
    p = _plan(tmp_path)
    p.write_text(p.read_text().replace("exploration_seeds = [0, 1]", f"exploration_seeds = {seeds}"))
    with pytest.raises(ConfigError, match=re.escape(f"exploration_seeds holds {said}; allowed: "
                                                    "a list of integers >= 0")):
        cf.read_plan(p)


@pytest.mark.parametrize("old, new, said", [
    # beside the real key, a misspelt one was read as nothing
    ("alpha = 0.05", "alpha = 0.05\nalpah = 0.01", "[test] key 'alpah' is unknown (did you mean "
     "alpha?); allowed: primary, test, alternative, alpha, recall_rule"),
    # in another table than its own, the plan's own value was used
    ("alpha = 0.05", "alpha = 0.05\nseeds_last = 11", "[test] key 'seeds_last' is unknown"),
    ("[baseline]", "[baseline]\nk = 3", "[baseline] key 'k' is unknown"),
    ("[test]", "[tset]\nx = 1\n[test]", "table [tset] is unknown (did you mean test?)"),
    ("world_seed = 0", "world_seed = 0\nbonus = true", "key 'bonus' is unknown"),
])
def test_a_plan_key_it_does_not_read_is_refused(tmp_path, old, new, said):
    p = _plan(tmp_path)
    p.write_text(re.sub(rf"(?m)^{re.escape(old)}$", new.replace("\\", "\\\\"), p.read_text(), count=1))
    with pytest.raises(ConfigError, match=re.escape(said)):
        cf.read_plan(p)


def test_the_committed_plan_is_the_explorations_best_setting():
    plan = cf.read_plan(ROOT / "docs/preregistration/detectors_goal3.toml")
    assert plan["candidate"][0] == "bocpd" and plan["baseline"] == ("evalstop", {"k": 2})
    assert not plan["seeds"] & plan["exploration_seeds"]
    assert det.label(*plan["candidate"]) in (ROOT / "docs/detectors.md").read_text()


@pytest.mark.parametrize("params, said", [
    # written into a spec, a text value or key added a parameter the table does not show:
    # both ran EvalStop with scope=all, the text "3" ran k=3
    ('{ k = "2,scope=all" }', "[baseline] policy.k='2,scope=all' is invalid; allowed: an integer"),
    ('{ "scope=all,k" = 2 }', "[baseline] policy parameter 'scope=all,k' is not a parameter of "
     "evalstop; allowed: k, scope"),
    ('{ k = "3" }', "[baseline] policy.k='3' is invalid; allowed: an integer"),
])
def test_plan_parameters_are_values_not_spec_text(tmp_path, params, said):
    p = _plan(tmp_path)
    p.write_text(p.read_text().replace("params = { k = 2 }", f"params = {params}"))
    with pytest.raises(ConfigError, match=re.escape(said)):
        cf.read_plan(p)


def test_a_plan_setting_has_no_scope(tmp_path):
    """Every trace run is in the comparison's scope: a plan's scope = "all" was read by
    nothing, and the comparison ran to its label, which raised a ValueError on the word."""
    p = _plan(tmp_path)
    p.write_text(p.read_text().replace("params = { k = 2 }", 'params = { k = 2, scope = "all" }'))
    with pytest.raises(ConfigError, match=r"^\S+: \[baseline\] policy parameter 'scope' is not "
                       r"a detector setting's .*; allowed: k$"):
        cf.read_plan(p)
