"""Sweep files (TOML) expanded into cells.

A sweep file is declarative::

    name = "noise"                 # optional; defaults to the file's stem
    title = "Detection vs evaluation noise"
    clusters = 2000                # clusters per cell
    chunk = 250                    # clusters per chunk (the unit of work and of resume)
    seed = 0
    baseline = "none"              # each cell's paired baseline policy; false = no baseline

    [base]                         # any config field, flat (see FIELDS)
    scheduler = "srtf_est"         # a SchedulerConfig.parse spec
    policy = "evalstop:k=2"        # a PolicyConfig.parse spec
    mix = "rlhf_heavy"

    [axes]                         # crossed: one cell per combination (metrics: [base] only)
    sigma = [0.0, 0.05, 0.1]
    policy = ["evalstop:k=2", "stop_at:f=0.65"]

Every cell is validated (``SimConfig``) before anything runs, and every ``[base]`` value,
also one that every cell overrides; a bad file raises one ``ConfigError`` naming the file
and the field (``base.sigma`` for a ``[base]`` value no cell uses).  A spec's parameters must be ones its
policy or scheduler declares (``fastsim.registry``); each parameter a policy or scheduler
the file names declares is a field too, a built-in's or a user's, by one rule (``z = [1,
2]`` beside ``policy = "peak"``, ``delta = [0.01, 0.02]`` beside ``policy =
"mymod:drawdown"``: ``declared_fields``).  ``[base]`` and axis fields that do
not apply to a cell (``k`` for ``stop_at``, thresholds for ``fifo``) are reset to
their defaults, so cells that would simulate the same thing are one cell; one that applies
to no cell (``k`` beside ``stop_at`` alone) is refused, naming the registered declarations
that have it.

``baseline`` takes what ``fastsim run --baseline`` takes (``fastsim.config.parse_baseline``):
a policy spec (``"none"``, ``"evalstop:k=3"``, ``"oracle"``, ``"MODULE:FUNCTION"``) or
false.  Each cell gets a baseline cell: the same workload and scheduler under that policy,
exactly as its spec says (``[base]`` and axis policy fields do not apply to it), shared
between all cells that need it.  A cell whose config equals its baseline's is the
baseline (``is_baseline``) and is paired with nothing.  ``"none"`` (the default) expands as
it did before other baselines existed: same cells, ids and grid hash.  A cell's id is a
hash of its canonical config, so it is the same in every sweep that contains it.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import fastsim
from fastsim import defaults as D
from fastsim import registry as R
from fastsim.config import (PolicyConfig, SchedulerConfig, SimConfig, Unread, WorkloadConfig,
                            inert_settings, parse_baseline, plain)
from fastsim.errors import ConfigError, did_you_mean, one_line, printable
from fastsim.io import axis_refusal, read_toml, toml_echo, toml_text
from fastsim.metrics import check_code as check_metric_code
from fastsim.metrics import lookup as metric
from fastsim.resources import package_sha256
from fastsim.sweep.figures import check_figure_name
from fastsim.user_modules import files_naming_modules
from fastsim.values import MAX_CLUSTER, MAX_SEED, check_file_path

WORKLOAD_FIELDS = tuple(f.name for f in fields(WorkloadConfig))
SCHEDULER_FIELDS = R.SCHEDULER_FIELDS
POLICY_FIELDS = R.POLICY_FIELDS
# The fields whose meaning no declaration changes: the specs, the metrics, the workload's.
SPEC_FIELDS = ("scheduler", "policy", "metrics")
FIXED_FIELDS = SPEC_FIELDS + WORKLOAD_FIELDS
# The names a [base] key or an axis may always use.  Beside them, every parameter a policy
# or scheduler the file names declares is a field (``declared_fields``: a detector's z, a
# user's delta), and a registered declaration's (``registered_fields``) is refused where no
# cell has it as applying to no cell, naming whose it is (``_check_used``).
FIELDS = FIXED_FIELDS + SCHEDULER_FIELDS + POLICY_FIELDS
# The fields whose one value is a list (or may be: a mix's fractions); any other given a
# list under [base] was meant as an axis
LIST_FIELDS = ("metrics", "mix", "thresholds_gpu_h") + tuple(
    f.name for f in fields(WorkloadConfig) if isinstance(f.default, tuple))
TOP_KEYS = ("name", "title", "description", "clusters", "chunk", "seed", "baseline", "base", "axes")
MAX_CELLS = 10_000
# every chunk is files on disk and an entry of the list a run (or resume) checks first: a
# sweep of 10^13 clusters in chunks of 250 spent minutes and gigabytes building that list
MAX_CHUNKS = 1_000_000
# name, title and description are stored in sweep.json: a few short lines, and a megabyte
# of them must not push a legitimate manifest past its read cap (store.MANIFEST_MAX_BYTES)
MAX_TEXT = 10_000


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a validated config and where its baseline is."""

    id: str
    config: SimConfig
    baseline: str | None  # id of the paired baseline cell; None for baselines themselves
    is_baseline: bool = False  # the baseline of its workload and scheduler (run once, shared)

    @property
    def label(self) -> str:
        return cell_label(self.config)


@dataclass(frozen=True)
class Grid:
    """An expanded sweep: cells (baselines included), size and seed."""

    name: str
    title: str
    source: str
    clusters: int
    chunk: int
    seed: int
    axes: tuple[str, ...]
    cells: tuple[Cell, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # The policy every cell is paired against (None: no baseline); the cells say the rest.
    baseline: PolicyConfig | None = field(default=PolicyConfig(name="none"), compare=False)
    # workload fields the file sets that no cell's result depends on, each with why
    inert: dict[str, str] = field(default_factory=dict, compare=False)

    def inert_notes(self, keep_jobs: bool = False) -> list[str]:
        """One line per workload field the file sets that changes no result of any cell
        (``fastsim.config.inert_settings`` of every cell), and per reason the policy or
        the baseline acts on no job of some cells (how many): said once per sweep.  With
        ``keep_jobs`` the per-job records are results too (they carry ``t_est_h``)."""
        inert = (_inert_in_every_cell(self.cells, self.baseline, list(self.inert), jobs=True)
                 if keep_jobs else self.inert)
        notes = [f"{name} has no effect in any cell: {why}" for name, why in inert.items()]
        # the policy and the baseline, by the rule of a run's (``inert_settings``): one
        # note per reason, for the cells it holds in; a baseline cell is the baseline
        paired = [c for c in self.cells if not c.is_baseline]
        cells: dict[tuple[str, str], int] = {}
        for cell in paired:
            for name, why in inert_settings(cell.config, self.baseline,
                                            ["policy", "baseline"]).items():
                cells[name, why] = cells.get((name, why), 0) + 1
        notes += [f"{name} has no effect in "
                  f"{'any cell' if n == len(paired) else f'{n} of {len(paired)} cells'}: {why}"
                  for (name, why), n in cells.items()]
        return [one_line(f"{self.source}: {note}") for note in notes]

    @property
    def n_chunks(self) -> int:
        return -(-self.clusters // self.chunk)

    def chunk_range(self, index: int) -> tuple[int, int]:
        """``(cluster_start, n_clusters)`` of chunk ``index``."""
        start = index * self.chunk
        return start, min(self.chunk, self.clusters - start)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)

    def canonical(self) -> dict[str, Any]:
        """What the results depend on: sorted cells' configs, clusters, chunk, seed."""
        cells = sorted(({"id": c.id, "config": c.config.to_dict(), "baseline": c.baseline}
                        for c in self.cells), key=lambda d: d["id"])
        # Through JSON so that tuples and lists compare equal to a manifest read back.
        return json.loads(_canonical_json({"clusters": self.clusters, "chunk": self.chunk,
                                           "seed": self.seed, "cells": cells}))

    @cached_property
    def hash(self) -> str:
        """Of ``canonical()``; cached, as every chunk's record is checked against it (the
        grid is frozen)."""
        return grid_hash(self.canonical())

    @cached_property
    def code(self) -> dict[str, Any]:
        """The code the results are computed by, which ``canonical()`` does not cover:
        fastsim's version and a SHA-256 of its own source (``resources.package_sha256``;
        a development checkout keeps its version from commit to commit), and a SHA-256 of
        the source of each user function the cells name (stop policy, scheduler key or
        metric, by ``MODULE:FUNCTION``; ``registry.source_sha256``).  A user policy's or
        key's cells also carry a short hash of it (``impl``), a metric's do not.  Kept out
        of ``hash``, so that the cells and hashes of existing results stay what they are;
        the manifest and every chunk record name it, and ``diff_code`` compares two.
        Cached as ``hash`` is."""
        return code_of(c.config for c in self.cells)


def code_of(configs: Iterable[SimConfig]) -> dict[str, Any]:
    """``Grid.code`` of cells of these configs, as this process reads the code (a Dask
    worker checks its own against the grid's)."""
    user = {}
    for cfg in configs:
        for decl in (cfg.policy.decl, cfg.scheduler.decl):
            if decl.user is not None:
                R.check_pure(decl)  # before any chunk is written, its helpers all defined
                user[decl.ref] = R.source_sha256(decl.user)
        for ref in cfg.metrics:
            m = metric(ref)
            check_metric_code(m)  # as check_pure above
            user[ref] = R.source_sha256(m.fn)
    return {"fastsim": fastsim.__version__, "fastsim_sha256": package_sha256(),
            "user": dict(sorted(user.items()))}


def grid_hash(canonical: dict[str, Any]) -> str:
    """The hash of a grid's ``canonical()`` (``Grid.hash``), or of a manifest's ``grid``,
    which a reader of a finished sweep checks against the hash the manifest names."""
    return hashlib.sha256(_canonical_json(canonical).encode()).hexdigest()


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_id(cfg: SimConfig) -> str:
    """Stable short id of a canonical config."""
    return hashlib.sha256(_canonical_json(cfg.to_dict()).encode()).hexdigest()[:12]


def cell_label(cfg: SimConfig) -> str:
    return f"{cfg.scheduler.label} | {cfg.policy.label}"


def canonicalize(cfg: SimConfig) -> SimConfig:
    """Reset parameters that cannot affect the cell, so equal simulations are equal configs."""
    p, s = cfg.policy, cfg.scheduler
    pol = PolicyConfig(name=p.name, params=p.params,
                       **{k: getattr(p, k) for k in _policy_fields(p)})
    sch = SchedulerConfig(name=s.name, params=s.params,
                          **{k: getattr(s, k) for k in _scheduler_fields(s)})
    return SimConfig(cfg.workload, sch, pol, cfg.metrics)


def _policy_fields(p: PolicyConfig) -> tuple[str, ...]:
    """The config fields that matter for policy ``p`` (the rest are reset to defaults)."""
    d = p.decl
    names = () if d.stores_params else tuple(q.name for q in d.params)
    return tuple(n for n in names + ("scope",) if n != "scope" or d.scoped)


def _scheduler_fields(s: SchedulerConfig) -> tuple[str, ...]:
    """The config fields that matter for scheduler ``s`` (``thresholds_gpu_h`` for
    ``tiresias``; a user's scheduler keeps its parameters in ``params``)."""
    return () if s.decl.user is not None else tuple(q.target for q in s.decl.params)


def build_config(values: dict[str, Any], axis_keys: tuple[str, ...] = ()) -> SimConfig:
    """A ``SimConfig`` from flat field values (``scheduler``/``policy`` are specs).

    Precedence for a policy or scheduler parameter: an axis field, then the spec's own
    parameter (``evalstop:k=3``), then a ``[base]`` field.
    """
    sched_spec = values.get("scheduler", D.SCHEDULER)
    pol_spec = values.get("policy", D.POLICY)
    if not isinstance(sched_spec, str):
        raise ConfigError(f"scheduler={sched_spec!r} is invalid; allowed: a spec such as 'fifo:backfill'")
    if not isinstance(pol_spec, str):
        raise ConfigError(f"policy={pol_spec!r} is invalid; allowed: a spec such as 'evalstop:k=2'")
    sched = _with_fields(SchedulerConfig.parse(sched_spec), sched_spec, values, axis_keys)
    pol = _with_fields(PolicyConfig.parse(pol_spec), pol_spec, values, axis_keys)
    work = WorkloadConfig(**{k: values[k] for k in WORKLOAD_FIELDS if k in values})
    metrics = values.get("metrics", ())
    if not isinstance(metrics, (list, tuple)) or not all(isinstance(m, str) for m in metrics):
        raise ConfigError(f"metrics={metrics!r} is invalid; allowed: a list of MODULE:FUNCTION")
    return canonicalize(SimConfig(work, sched, pol, tuple(metrics)))


def _with_fields(part: PolicyConfig | SchedulerConfig, spec: str, values: dict[str, Any],
                 axis_keys: tuple[str, ...]) -> PolicyConfig | SchedulerConfig:
    """``part`` with each of its fields (``_sweep_fields``) that ``values`` gives: an
    axis's value over the spec's own parameter, the spec's over ``[base]``'s.  A field of
    the same name in another declaration is that one's (a key's k is not EvalStop's; a
    file where both take it is refused: ``_check_declared``)."""
    what = "policy" if isinstance(part, PolicyConfig) else "scheduler"
    in_spec = {part.decl.param(k).target for k in R.parse_spec(spec, what)[1]}
    given = {f: values[f] for f in _sweep_fields(part)
             if f in values and (f in axis_keys or f not in in_spec)}
    if not given:
        return part
    # a detector's and a user's parameters live in ``params``; the built-ins' in fields
    kept = {f: v for f, v in given.items() if f in dict(part.params)}
    named = {f: v for f, v in given.items() if f not in kept}
    return replace(part, **named, params=_with_values(part, kept))


def _declared(d: R.Declaration) -> tuple[str, ...]:
    """The sweep fields declaration ``d``'s parameters are, each named as the config field
    it fills (tiresias' ``thresholds``: ``thresholds_gpu_h``), but those named as a fixed
    field (``sigma``: the workload's; ``_check_declared`` refuses a file that sets one)."""
    return tuple(q.target for q in d.params if q.target not in FIXED_FIELDS)


def _with_values(part: PolicyConfig | SchedulerConfig, given: dict[str, Any]
                 ) -> tuple[tuple[str, Any], ...]:
    """``part.params`` with the ``given`` fields' values, each checked by its declared
    ``Param`` and named as the field (``delta=-1 is invalid; allowed: ...``)."""
    checked = {k: part.decl.param(k).check(v) for k, v in given.items()}
    return tuple({**dict(part.params), **checked}.items())


def _sweep_fields(part: PolicyConfig | SchedulerConfig) -> tuple[str, ...]:
    """Every sweep field that sets a parameter of ``part``: each its declaration declares
    (``scope`` where it matters)."""
    d = part.decl
    return tuple(f for f in _declared(d) if f != "scope" or d.scoped)


def _field_value(part: PolicyConfig | SchedulerConfig, name: str) -> Any:
    """The value of ``part``'s field ``name`` (one of ``_sweep_fields``)."""
    params = dict(part.params)
    return params[name] if name in params else getattr(part, name)


def _top_key_hint(key: str, doc: dict[str, Any]) -> str:
    """A field written above ``[base]`` belongs under it: ``base_rate = 0.3`` there is not
    a misspelt ``base``, which a file cannot set to a number; nor is a parameter of a
    policy the file names (``delta``)."""
    if key == "metrics":  # columns of every cell, never an axis
        return " (a field: under [base], as a list)"
    base, axes = (t if isinstance(t, dict) else {} for t in (doc.get("base"), doc.get("axes")))
    if key in FIELDS or key in declared_fields(base, axes) or key in registered_fields():
        return " (a field: under [base], or under [axes] as a list)"
    return did_you_mean(str(key), TOP_KEYS)


def _specs(base: dict, axes: dict) -> Iterable[tuple[str, Any]]:
    """``(kind, spec)`` of each policy and scheduler the file's ``[base]`` and ``[axes]``
    name (the defaults where they name none)."""
    for what, default in (("policy", D.POLICY), ("scheduler", D.SCHEDULER)):
        given = axes.get(what, [base.get(what, default)])
        yield from ((what, spec) for spec in (given if isinstance(given, list) else [given]))


def _looked_up(base: dict, axes: dict) -> Iterable[tuple[str, str, R.Declaration | ConfigError]]:
    """``(kind, name, declaration)`` of each spec of ``_specs``, the lookup's ConfigError
    in place of the declaration where there is none; a spec that does not parse is skipped
    here and refused, naming it, when its cell is built."""
    for what, spec in _specs(base, axes):
        try:
            name = R.parse_spec(spec, what)[0]
        except ConfigError:
            continue
        try:
            decl = R.lookup(what, name)
        except ConfigError as exc:
            decl = exc
        yield what, name, decl


def _named(base: dict, axes: dict) -> Iterable[tuple[str, R.Declaration]]:
    """``(kind, declaration)`` of each spec of ``_specs`` that names one."""
    return ((what, d) for what, _, d in _looked_up(base, axes) if isinstance(d, R.Declaration))


def _unloaded_user_spec(base: dict, axes: dict) -> str | None:
    """Why the first user's spec of the file (``MODULE:FUNCTION``) cannot be loaded, if one
    cannot: its parameters are then unknown fields, and ``per_gpu`` beside a
    ``mykeys:gpu_h_first`` run without ``PYTHONPATH`` was refused as an unknown field,
    never saying that ``mykeys`` could not be imported."""
    return next((toml_echo(str(d), {what: name}) for what, name, d in _looked_up(base, axes)
                 if ":" in name and isinstance(d, ConfigError)), None)


def _owners(decls: Iterable[tuple[str, R.Declaration]]) -> dict[str, dict[str, list[str]]]:
    """field -> kind (``policy``, ``scheduler``) -> the declarations of ``decls`` with a
    parameter that is that field, or is named as a workload field (``sigma``, which
    ``_check_declared`` refuses)."""
    return {f: owners for f, owners in R.param_owners(decls, by="target").items()
            if f not in SPEC_FIELDS}


def declared_fields(base: dict, axes: dict) -> dict[str, dict[str, list[str]]]:
    """The parameters of the policies and schedulers the file names, built-in or a user's,
    each a field (``_owners``): every declared parameter is, by one rule."""
    return _owners(_named(base, axes))


def registered_fields() -> dict[str, dict[str, list[str]]]:
    """``_owners`` of every registered policy and scheduler (the built-ins, and the users'
    this process has imported with a ``name``): a field one of them declares but none the
    file names applies to no cell, and is refused saying whose it is (``_check_used``)."""
    return _owners([*(("policy", d) for d in R.policies()),
                    *(("scheduler", d) for d in R.schedulers())])


def _fail(source: str, msg: str) -> ConfigError:
    return ConfigError(f"{source}: {msg}")


def _check_int(source: str, key: str, value: Any, lo: int, hi: int | None = None,
               override: bool = False, options: bool = False) -> int:
    value = plain(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (
            hi is not None and value > hi):
        allowed = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"
        if override:  # --clusters 0 is the caller's value, not one the file holds
            given = f"--{key}={value!r} (given in place of {source}'s {key})" if options else (
                f"{key}={value!r} (given in place of {source}'s)")
            raise ConfigError(f"{given} is invalid; allowed: {allowed}")
        raise _fail(source, f"{key}={toml_text(value)} is invalid; allowed: {allowed}")
    return value


def _check_base(source: str, base: dict[str, Any], axis_names: tuple[str, ...],
                first: tuple[Any, ...]) -> None:
    """Check every ``[base]`` value, also one that an axis or a spec's own parameter
    overrides in every cell: a wrong value in the file is wrong wherever it is.  Each is put
    in place of what the first cell uses, taking precedence; the error names ``base.FIELD``."""
    cell = {**base, **dict(zip(axis_names, first))}
    try:
        build_config(cell, axis_names)
    except ConfigError:
        return  # the first cell itself is invalid: the cell loop reports it, naming the cell
    for key, value in base.items():
        try:
            build_config({**cell, key: value}, (*axis_names, key))
        except ConfigError as exc:
            msg = toml_echo(str(exc), {key: value})
            if msg.startswith(f"{key}="):  # "sigma=-1 is invalid; ..." -> "base.sigma=-1 ..."
                raise _fail(source, f"base.{msg}") from None
            raise _fail(source, f"base.{key}={toml_text(value)}: {msg}") from None


def _check_chunk_count(source: str, n_cells: int, clusters: int, chunk: int,
                       given: tuple[bool, bool] = (False, False), options: bool = False) -> None:
    """At most ``MAX_CHUNKS`` chunks; ``given``: whether clusters and chunk replace the
    file's, named as typed (``--clusters=...`` with ``options``) rather than as its fields."""
    total = n_cells * -(-clusters // chunk)
    if total > MAX_CHUNKS:
        named = [f"--{key}={value}" if over and options else f"{key}={value}"
                 for key, value, over in (("clusters", clusters, given[0]),
                                          ("chunk", chunk, given[1]))]
        raise _fail(source, f"{n_cells} cells of {named[0]} in chunks of {named[1]} "
                    f"make {total:,} chunks; allowed: at most {MAX_CHUNKS:,} in a sweep (a "
                    "larger chunk, fewer clusters)")


def parse_sweep(doc: dict[str, Any], source: str, *, clusters: int | None = None,
                chunk: int | None = None, seed: int | None = None,
                base_overrides: dict[str, Any] | None = None, options: bool = False) -> Grid:
    """Expand a parsed sweep document; ``source`` names it in error messages.

    ``clusters``, ``chunk``, ``seed`` and ``base_overrides`` replace the file's values
    (the reproduction uses them to size the same experiments differently).  ``options``:
    the first three are the command line's options, which an error names as typed
    (``--chunk=0``), not as the file's fields.
    """
    name = _check_top_level(doc, source)
    n_clusters = _check_int(source, "clusters", clusters if clusters is not None
                            else doc.get("clusters", D.CLUSTERS), 1, MAX_CLUSTER,
                            override=clusters is not None, options=options)
    n_chunk = _check_int(source, "chunk", chunk if chunk is not None
                         else doc.get("chunk", min(n_clusters, 250)), 1,
                         override=chunk is not None, options=options)
    the_seed = _check_int(source, "seed", seed if seed is not None else doc.get("seed", D.SEED),
                          0, MAX_SEED, override=seed is not None, options=options)
    baseline_spec = doc.get("baseline", "none")
    try:
        baseline = parse_baseline(baseline_spec, no_baseline='false (no quotes) or "off"')
    except ConfigError as exc:
        raise _fail(source, toml_echo(str(exc), {"baseline": baseline_spec})) from None
    base, axes = _check_tables(source, doc, base_overrides)
    cells = _expand_cells(source, base, axes, baseline, baseline_spec)
    _check_labels(source, cells)
    _check_chunk_count(source, len(cells), n_clusters, n_chunk,
                       (clusters is not None, chunk is not None), options)
    title = doc.get("title", doc.get("description", name))
    return Grid(name=name, title=str(title), source=str(source), clusters=n_clusters,
                chunk=n_chunk, seed=the_seed, axes=tuple(axes), cells=cells,
                baseline=baseline, inert=_inert_in_every_cell(cells, baseline,
                                                              [*base, *axes]))


def _check_top_level(doc: dict[str, Any], source: str) -> str:
    """The document's own keys and texts checked; the sweep's name."""
    if "experiment" in doc and "experiment" not in TOP_KEYS:
        raise _fail(source, "is a cost-aware sweep (it has 'experiment'); run it with "
                    f"`fastsim costaware sweep {source} --out DIR`")
    for key in doc:
        if key not in TOP_KEYS:
            raise _fail(source, f"key {key!r} is unknown{_top_key_hint(key, doc)}; allowed: "
                        f"{', '.join(TOP_KEYS)}")
    for key in ("title", "description"):  # a name's own checks follow
        text = doc.get(key, "")
        # the title heads summary.txt, where a line break split its first line in two and
        # a NUL was written as it was
        if not (isinstance(text, str) and text.isprintable()):
            raise _fail(source, f"{key}={toml_text(text)} is invalid; allowed: a string of at "
                        f"most {MAX_TEXT} printable characters")
        if isinstance(text, str) and len(text) > MAX_TEXT:
            raise _fail(source, f"{key} is {len(text)} characters long; allowed: at most "
                        f"{MAX_TEXT} (it is stored in the sweep's sweep.json)")
    if "title" in doc and "description" in doc:  # one field, two names: one was unused
        raise _fail(source, "has both title and description, which are one field (the "
                    "tables' heading); allowed: one of them")
    name = doc.get("name", Path(source).stem)
    # it heads the sweep's line and fills the tables' experiment column: a line break
    # split that line in two, a NUL or blank name showed nothing readable
    if (not isinstance(name, str) or not name.strip() or "/" in name
            or not name.isprintable()):
        raise _fail(source, f"name={toml_text(name)} is invalid; allowed: a non-blank string "
                    "of printable characters without '/'")
    check_figure_name(name, source)  # fastsim figures' rule, before the sweep runs
    return name


def _check_tables(source: str, doc: dict[str, Any], base_overrides: dict[str, Any] | None
                  ) -> tuple[dict[str, Any], dict[str, list]]:
    """``[base]`` (with ``base_overrides`` over it) and ``[axes]``: tables of known fields
    (``FIELDS``, and the parameters of the users' declarations the file names), each of
    one meaning, every axis a non-empty list, and not too many cells to build."""
    base = doc.get("base", {})
    axes = doc.get("axes", {})
    for key, value, lines in (("base", base, "field = value"), ("axes", axes, "field = [values]")):
        if not isinstance(value, dict):  # as fastsim costaware sweep says it
            raise _fail(source, f"{key}={toml_text(value)} is invalid; allowed: a table "
                                f"([{key}] with {lines} lines)")
    if base_overrides is not None and not isinstance(base_overrides, dict):
        raise ConfigError(f"base_overrides={base_overrides!r:.60} is invalid; allowed: a dict "
                          "of [base] field = value, or None")
    base = {**base, **(base_overrides or {})}
    declared = declared_fields(base, axes)
    registered = registered_fields()
    for section, table in (("base", base), ("axes", axes)):
        for key in table:
            if key not in FIELDS and key not in declared and key not in registered:
                # metrics are columns of every cell, never an axis (refused below)
                allowed = [f for f in FIELDS if section == "base" or f != "metrics"]
                allowed += [f for f in declared if f not in FIELDS]
                hint = did_you_mean(str(key), (*allowed, *registered))
                if (unloaded := _unloaded_user_spec(base, axes)) is not None:
                    # its own "allowed:" lists the policies or schedulers, not the fields
                    hint += (", and may be a parameter of a spec that cannot be loaded: "
                             + unloaded.split("; allowed: ")[0])
                # a user's parameter is known only once its module is imported, which its
                # spec on the file's policy or scheduler does
                raise _fail(source, f"[{section}] field {key!r} is unknown{hint}; "
                                    f"allowed: {', '.join(allowed)}, or a parameter of a "
                                    "user's policy or scheduler key that the file names "
                                    "(MODULE:FUNCTION)")
            _check_declared(source, section, key, declared.get(key))
    for key, values in axes.items():
        if key == "metrics":  # columns of every cell, not cells: no table column holds them
            raise _fail(source, f"axes.metrics={toml_text(values)} is invalid; allowed: [base] "
                        "metrics = [\"MODULE:FUNCTION\", ...], computed in every cell")
        if (why := axis_refusal(key, values)) is not None:
            raise _fail(source, why)
    n_combos = math.prod(len(v) for v in axes.values())  # before any is built
    if n_combos > MAX_CELLS:
        raise _fail(source, f"the axes cross to {n_combos} cells; at most {MAX_CELLS} allowed")
    return base, axes


def _check_declared(source: str, section: str, key: str,
                    owners: dict[str, list[str]] | None) -> None:
    """A field the file sets that is a user's parameter means one thing: not also the
    workload's field of that name (``sigma``: which of the two would the file set?), nor
    a parameter of both a policy and a scheduler."""
    if owners is None:
        return
    named = " and of ".join(f"{kind} {', '.join(names)}" for kind, names in owners.items())
    if key in WORKLOAD_FIELDS:
        raise _fail(source, f"[{section}] field {key!r} is the workload's {key} and also a "
                    f"parameter of {named}; allowed: a parameter named like no workload "
                    f"field (rename it in its declaration), or {key} left out of the file")
    if len(owners) > 1:
        raise _fail(source, f"[{section}] field {key!r} is a parameter of {named}; allowed: "
                    "a field of policies or of schedulers, not both (give it in each spec, "
                    "or rename it in a declaration)")


def _expand_cells(source: str, base: dict[str, Any], axes: dict[str, list],
                  baseline: PolicyConfig | None, baseline_spec: Any) -> tuple[Cell, ...]:
    """Every combination of the axes over ``base`` as a checked cell, with the baseline
    cell it is paired against; equal simulations are one cell."""
    axis_names = tuple(axes)
    combos = list(itertools.product(*axes.values()))
    _check_base(source, base, axis_names, combos[0])
    by_id: dict[str, Cell] = {}
    # policy and scheduler fields given (k, f, w, tol, scope, backfill, thresholds_gpu_h,
    # a user's parameter) -> their kind and the policies or schedulers of the cells, while
    # they apply to none
    kinds = {f: next(iter(owners)) for f, owners in
             {**registered_fields(), **declared_fields(base, axes)}.items()
             if f not in WORKLOAD_FIELDS}
    unused = {f: (kind, set()) for f, kind in kinds.items() if f in axes or f in base}
    for combo in combos:
        values = {**base, **dict(zip(axis_names, combo))}
        where = ", ".join(f"{a}={toml_text(v)}" for a, v in zip(axis_names, combo)) or "base"
        try:
            cfg = build_config(values, axis_names)
        except ConfigError as exc:
            raise _fail(source, f"cell ({where}): {toml_echo(str(exc), values)}"
                                f"{_axis_hint(str(exc), base)}") from None
        for f, (kind, names) in list(unused.items()):
            part = getattr(cfg, kind)
            if f not in _sweep_fields(part):
                names.add(part.name)
            else:
                del unused[f]  # it applies to a cell
        cid = config_id(cfg)
        base_id = None
        if baseline is not None:
            try:
                base_cfg = canonicalize(replace(cfg, policy=baseline))
            except ConfigError as exc:  # e.g. too few evaluations for the baseline policy
                raise _fail(source, f"baseline={toml_text(baseline_spec)} in cell ({where}): "
                                    f"{exc}") from None
            base_id = config_id(base_cfg)
            if base_id == cid:  # the cell is its own baseline: run once, paired with nothing
                base_id = None
            else:
                by_id.setdefault(base_id, Cell(base_id, base_cfg, None, is_baseline=True))
        by_id.setdefault(cid, Cell(cid, cfg, base_id, is_baseline=baseline is not None
                                   and base_id is None))
    _check_used(source, unused, axes)
    return tuple(by_id.values())


def _axis_hint(msg: str, base: dict[str, Any]) -> str:
    """For a [base] field of one value given a list (``scheduler = ["fifo", "sjf_est"]``),
    refused as an invalid value: several values to compare are an axis."""
    for key, value in base.items():
        if isinstance(value, list) and key not in LIST_FIELDS and msg.startswith(f"{key}="):
            return f" ([base] gives every cell one {key}; several, a cell each, go under [axes])"
    return ""


def _check_used(source: str, unused: dict[str, tuple[str, set]], axes: dict[str, list]) -> None:
    """A policy or scheduler field given that no cell's policy or scheduler has (``k``
    beside only ``stop_at``, ``thresholds_gpu_h`` beside no ``tiresias``, ``z`` beside no
    detector) was dropped from every cell without a word; refused, allowing the fields the
    grid's declarations have and the declarations that have it."""
    for f, (kind, names) in unused.items():
        where = "axis" if f in axes else "[base] field"
        have = "; ".join(f"{n}: {_fields_text(R.lookup(kind, n))}" for n in sorted(names))
        others = [n for n in registered_fields().get(f, {}).get(kind, []) if n not in names]
        beside = f", or {f!r} beside a {kind} that declares it ({', '.join(others)})" if others else ""
        raise _fail(source, f"{where} {f!r} applies to no cell: no {kind} of the grid has the "
                    f"field {f!r}; allowed: a field of a {kind} of the grid ({have}){beside}")


def _fields_text(d: R.Declaration) -> str:
    """What declaration ``d`` has for a sweep file: its fields, else the parameters named
    like a workload field, which go in its spec only (``sigma``), else none."""
    own = [f for f in _declared(d) if f != "scope"]
    spec_only = [q.name for q in d.params if q.target in FIXED_FIELDS]
    return (", ".join(own) if own else f"{', '.join(spec_only)}, in its spec only" if spec_only
            else "no parameter")


def _inert_in_every_cell(cells: Iterable[Cell], baseline: PolicyConfig | None,
                         given: list[str], jobs: bool = False) -> dict[str, str]:
    """The workload fields of ``given`` inert in every cell, each with the distinct reasons
    (a field inert under one scheduler of an axis but read under another is no news)."""
    why: dict[str, list[str]] = {f: [] for f in given if f in WORKLOAD_FIELDS}
    for cell in cells:  # a baseline cell's readers are a subset of its paired cells'
        said = inert_settings(cell.config, baseline, list(why), jobs=jobs)
        why = {f: [*reasons, said[f]] for f, reasons in why.items() if f in said}
    # one clause said once for the cells it holds in ("nothing reads training losses
    # (fifo and srtf_est with ...)"), not once a cell
    merged = {f: Unread.merged(reasons) for f, reasons in why.items()}
    return {f: "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
            for f, reasons in merged.items()}


def _check_labels(source, cells: Iterable[Cell]) -> None:
    """Tables, summaries and figures name a policy or a scheduler by its label: two of one
    label (the same declaration in two users' modules) were two cells under one heading
    in ``summary.txt``, one line's legend in a figure, that no reader could tell apart."""
    for kind in ("policy", "scheduler"):
        seen: dict[str, Any] = {}
        for cell in cells:
            part = getattr(cell.config, kind)
            other = seen.setdefault(part.label, part)
            if other.name != part.name:
                raise _fail(source, f"{kind} {other.name} and {part.name} are both labelled "
                            f"{part.label!r}; allowed: {kind} labels that differ (declare one "
                            "with a label of its own)")


def load_sweep(path: str | Path, **overrides: Any) -> Grid:
    """Read and expand a sweep file (see the module docstring); keyword overrides as in
    ``parse_sweep``.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "k.toml")
    >>> _ = open(p, "w").write('clusters = 4\\n[axes]\\nk = [1, 2]\\n')
    >>> [c.label for c in load_sweep(p).cells]
    ['srtf_est | none', 'srtf_est | evalstop(k=1)', 'srtf_est | evalstop(k=2)']
    """
    check_file_path(path, "path")
    with files_naming_modules(str(path)):
        return parse_sweep(read_toml(path), str(path), **overrides)


def axis_value(cfg: SimConfig, axis: str) -> Any:
    """The value an axis takes in a (canonical) config; None where it does not apply
    (``k`` of a ``stop_at`` cell, a user's parameter of another policy's cell).  Tuples
    become strings so a column has one type."""
    if axis == "scheduler":
        return cfg.scheduler.label
    if axis == "policy":
        return cfg.policy.label
    for part in (cfg.policy, cfg.scheduler):  # a field of each its own (k of a key's)
        if axis in _sweep_fields(part):
            v = _field_value(part, axis)
            break
    else:
        if axis not in WORKLOAD_FIELDS:  # a parameter this cell's parts do not declare
            return None
        v = getattr(cfg.workload, axis)
    if isinstance(v, (tuple, list)):
        # every digit: a 6-digit :g printed (0.1, 0.5) and (0.1000001, 0.5) as one value
        return "/".join(R.exact_text(x) if isinstance(x, float) else str(x) for x in v)
    return v


def diff_grids(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two ``Grid.canonical()`` dicts."""
    out = [f"{k}: {clipped(str(old.get(k)))} -> {new.get(k)}"
           for k in ("clusters", "chunk", "seed") if old.get(k) != new.get(k)]
    old_cells = {c["id"]: c for c in old.get("cells", [])}
    new_cells = {c["id"]: c for c in new.get("cells", [])}
    removed = [c for i, c in old_cells.items() if i not in new_cells]
    added = [c for i, c in new_cells.items() if i not in old_cells]
    if removed or added:
        out.append(f"{len(removed)} cell(s) no longer in the grid, {len(added)} new cell(s)")
    # Show which fields changed: pair a removed and an added cell, same policy if possible.
    pairs = [(a, b) for a in removed for b in added
             if a["config"]["policy"]["name"] == b["config"]["policy"]["name"]]
    for a, b in pairs + list(zip(removed, added)):
        changes = _flat_diff(a["config"], b["config"])
        if changes:
            out.append("e.g. " + "; ".join(changes[:4]))
            break
    return out


def code_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Which parts of two ``Grid.code`` dicts differ: ``"fastsim"`` (the version),
    ``"fastsim_sha256"`` (its source, under one version; not compared when ``old`` was
    written before it was recorded), and each user function both name whose source
    differs (one that only one names is a change of the cells, which ``diff_grids``
    reports).  Empty: the same code."""
    if old.get("fastsim") != new["fastsim"]:
        out = ["fastsim"]  # another version: its source differs too, as a matter of course
    else:
        out = ["fastsim_sha256"] if old.get("fastsim_sha256", new["fastsim_sha256"]) \
            != new["fastsim_sha256"] else []
    then = old.get("user", {})
    return out + [ref for ref, sha in new["user"].items() if ref in then and then[ref] != sha]


def diff_code(old: dict[str, Any], new: dict[str, Any], *,
              changed: str = "has been edited since they were computed",
              versions: str = "they were computed by fastsim {old}, this is fastsim {new}",
              ) -> list[str]:
    """``code_changes`` of the code results were computed by (``old``) and this run's
    (``new``), in words; ``changed`` and ``versions`` word them for another comparison
    (a Dask worker's code against this process's)."""
    version = clipped(str(new["fastsim"]))
    words = {"fastsim": versions.format(old=clipped(str(old.get("fastsim"))), new=version),
             "fastsim_sha256": f"fastsim's own source {changed} (version {version} both: a "
                               "development checkout at another commit, or an edited install)"}
    return [words.get(part) or f"{part} {changed} (module {part.partition(':')[0]}, or a "
            "file of yours it uses)" for part in code_changes(old, new)]


def clipped(text: str, limit: int = 60) -> str:
    """Text read from a file (a version, a name, a value's ``repr``) for a one-line
    message: escaped (``errors.printable``; its backslashes left as they are, most being a
    repr's own escapes), cut to ``limit`` characters (a damaged manifest's megabyte made a
    megabyte of message)."""
    text = printable(text, backslash=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _flat_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _flat_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}: {clipped(repr(va))} -> {vb!r}")
    return out
