"""``benchmarks/snapshot.py compare``: a column the code adds since the snapshot (a new
metric) is reported as new, not as a difference; every column the snapshot has must still
be there and agree."""
import polars as pl


def _snapshot():
    # imported in the test: the script sets a warnings filter when loaded
    from conftest import benchmark_script

    return benchmark_script("snapshot")


def test_a_new_column_is_listed_as_new_and_the_old_ones_still_compared():
    snap = _snapshot()
    old = pl.DataFrame({"cluster": [0, 1], "fp": [2, 1], "fpr": [0.5, 0.25]})
    new = old.with_columns(pl.Series("stop_fpr", [0.25, 0.0]))
    assert snap.compare(old, new, "clusters") == []
    assert snap.new_columns(old, new) == ["stop_fpr"]
    changed = new.with_columns(pl.Series("fp", [2, 0]))
    assert snap.compare(old, changed, "clusters") == ["clusters.fp: 1 differ"]
    assert snap.compare(old, new.drop("fpr"), "clusters") == ["clusters: columns/height differ"]
    assert snap.compare(old, new.select("fp", "cluster", "fpr", "stop_fpr"), "clusters") == \
        ["clusters: columns/height differ"]
