"""Files that ship inside the package: the sweep definitions, the figure scripts and an
example evaluation log; and a SHA-256 of the package's own source.

In the repository they live at the top (``sweeps/``, ``figures/``); ``pyproject.toml``
maps them into the package as ``fastsim.sweeps`` and ``fastsim.figures``, so an editable
install and a wheel find them the same way, and nothing reaches into a checkout.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib.resources import files
from importlib.util import find_spec
from pathlib import Path

SHIPPED = ("sweeps", "figures")
# The subpackages pyproject.toml maps from the repository's top (package-dir): in a wheel
# they are folders of fastsim/, in an editable install they are not.
MAPPED = ("kernels", "figures", "sweeps")


def shipped(kind: str, name: str | None = None) -> Path:
    """The shipped folder ``kind`` (``"sweeps"`` or ``"figures"``), or file ``name`` in it.

    Examples
    --------
    >>> shipped("sweeps", "headline.toml").name
    'headline.toml'
    >>> shipped("sweeps", "headline.toml").is_file()
    True
    """
    if kind not in SHIPPED:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(SHIPPED)}")
    folder = files(f"fastsim.{kind}")
    # A wheel or an editable install unpacks to the file system, where files() is a Path.
    path = Path(str(folder))
    return path if name is None else path / name


def _shipped_names(prefix: str = "") -> list[str]:
    names = sorted(p.stem for p in shipped("sweeps").glob(f"{prefix}*.toml"))
    if not prefix:  # fastsim sweep's: the cost-aware files are fastsim costaware sweep's
        names = [n for n in names if not n.startswith("costaware_")]
    return names


def _shipped_sweeps(prefix: str = "") -> str:
    return ", ".join(_shipped_names(prefix))


def sweep_file(file: str | Path, prefix: str = "") -> Path:
    """A sweep file by path, or by the name of a shipped one (``"noise"``,
    ``"sweeps/noise.toml"``) when no such file exists here.  Only a bare name, or one
    under a relative ``sweeps/``, names a shipped file: a missing file at any other path
    is an error, never another file of the same name.  A path that exists but is not a
    regular file (a directory, a named pipe, a device) is an error before it is read.
    ``prefix``: the shipped sweeps an error lists (``"costaware_"`` for that command's;
    without one, every other shipped sweep).

    Examples
    --------
    >>> sweep_file("noise") == shipped("sweeps", "noise.toml")
    True
    """
    from fastsim.errors import ConfigError, did_you_mean, did_you_mean_path
    from fastsim.io import check_regular

    path = Path(file)
    if os.path.exists(path):  # os.path's: False, not OSError, for a name too long
        # a named pipe would block the read, /dev/zero fill the memory: refused unread
        check_regular(path, f"a TOML file, or one of {_shipped_sweeps(prefix)}")
        return path
    name = path.name if path.suffix == ".toml" else path.name + ".toml"
    candidate = shipped("sweeps", name)
    shipped_form = path.parent in (Path("."), Path("sweeps"))
    if shipped_form and os.path.isfile(candidate):
        return candidate
    # a sweep file of yours beside the one typed (mien.toml: mine.toml), else a name near a
    # shipped one, given as shipped names are (noize: noise): mien.toml beside mine.toml
    # was offered the shipped sweep mixed
    try:
        here = sorted(p for p in path.parent.glob("*.toml") if p.is_file())
    except OSError:  # a parent that cannot be listed offers nothing
        here = []
    near = did_you_mean_path(file, here)
    if not near and shipped_form:
        near = did_you_mean(path.stem, _shipped_names(prefix))
    raise ConfigError(f"{file}: no such file, nor a sweep shipped with fastsim{near}; allowed: "
                      f"a TOML file, or one of {_shipped_sweeps(prefix)}")


def example_log() -> Path:
    """A small evaluation log shipped with fastsim, what ``fastsim replay --example``
    replays: CSV, 3 jobs, 18 rows, with the mess of real logs (steps out of order, a step
    logged twice, a missing score; docs/replay.md's rules).  Copy it to start your own.

    Examples
    --------
    >>> example_log().read_text().splitlines()[0]
    'job_id,step,score,loss,proxy_reward,job_type,gpus,time'
    """
    return Path(str(files("fastsim.replay"))) / "example_evals.csv"


def package_folders() -> dict[str, list[Path]]:
    """The folders of fastsim's own source by subpackage (``""``: fastsim itself, then
    ``MAPPED``): inside ``fastsim/`` in a wheel, at the repository's top in an editable
    install, where they sit beside whatever else the checkout holds."""
    folders = {}
    for sub in ("", *MAPPED):
        spec = find_spec("fastsim" + (f".{sub}" if sub else ""))  # imports fastsim only
        folders[sub] = [Path(p) for p in spec.submodule_search_locations]
    return folders


@lru_cache(maxsize=None)
def package_sha256() -> str:
    """SHA-256 of fastsim's own source: every ``.py`` file of the package, by its path
    inside the package and its bytes, in path order; so the same in a wheel and in an
    editable install of the same commit, whose version (``__version__``) stays the same
    from commit to commit.  A sweep records it beside the version (``Grid.code``).  Read
    once per process (a few milliseconds): the code a process runs is what it imported."""
    sources: dict[str, Path] = {}
    for sub, folders in package_folders().items():
        for folder in folders:
            for path in folder.rglob("*.py"):
                if "__pycache__" not in path.parts:  # in a wheel a mapped file comes twice
                    sources[Path(sub, path.relative_to(folder)).as_posix()] = path
    digest = hashlib.sha256()
    for name in sorted(sources):
        data = sources[name].read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()
