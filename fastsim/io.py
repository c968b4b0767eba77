"""File input and output shared by every command.

Output is crash-safe: every file fastsim writes appears whole or not at all.  Data goes
to ``NAME.tmp`` beside the target, is flushed to disk, then renamed into place
(``os.replace`` is atomic on POSIX); a failure removes the temp file.  Input errors
(an unreadable file, invalid TOML) become one ``ConfigError`` naming the file.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import polars as pl

from fastsim.errors import ConfigError

TABLE_SUFFIXES = (".parquet", ".csv")


def _commit(tmp: Path, path: Path) -> None:
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        _commit(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_parquet(df: pl.DataFrame, path: Path) -> None:
    atomic_write_table(df, path, allowed=(".parquet",))


def atomic_write_table(df: pl.DataFrame, path: Path, allowed=TABLE_SUFFIXES) -> None:
    """Write ``df`` as Parquet or CSV, chosen by ``path``'s suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in allowed:
        raise ConfigError(f"output {path}: allowed: a file ending in {' or '.join(allowed)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        if suffix == ".csv":
            df.write_csv(tmp)
        else:
            df.write_parquet(tmp)
        _commit(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_toml(path: Path, what: str = "sweep file") -> dict[str, Any]:
    """Parse a TOML file; a missing or unreadable file or bad TOML is a ``ConfigError``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
