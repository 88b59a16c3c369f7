"""Which Parquet files a Spark streaming file sink has committed, read from its own log.

A file-sink folder holds a ``_spark_metadata`` log: one file per batch (``<n>``, or
``<n>.compact`` folding in the earlier ones), each a ``v1`` line then one JSON line per data
file with ``"action": "add"``. Spark's readers see only the files listed there; a part file a
killed executor left behind is on disk but not in the table, and reading it would count rows
twice (its retry committed them) or fail on a truncated footer.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import orjson

LOG_DIR = "_spark_metadata"


def parse_batch(text: str) -> tuple[set[str], set[str]]:
    """(paths added, paths deleted) by one batch file of the log; torn lines are skipped."""
    added: set[str] = set()
    deleted: set[str] = set()
    for line in text.splitlines()[1:]:  # the first line is the log's version, "v1"
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # the last line of a batch file being written
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            continue
        (added if entry.get("action") == "add" else deleted).add(entry["path"])
    return added, deleted


def in_table(table: Path, uri: str) -> Path:
    """Where a logged file is under ``table`` as this reader mounts it.

    The log holds absolute URIs as the writer saw them (``file:/w/t/tenant=a/part-0.parquet``,
    percent-encoded); a reader in another container mounts the warehouse elsewhere, so only
    the file's place inside the table (its partition folders and name) is kept.
    """
    parts = Path(unquote(urlparse(uri).path)).parts
    inside = [parts[-1]]
    for folder in reversed(parts[:-1]):
        if "=" not in folder:  # partition folders are name=value; the table's own is not
            break
        inside.insert(0, folder)
    return table.joinpath(*inside)


def _batch_number(name: str) -> int | None:
    stem = name.removesuffix(".compact")
    return int(stem) if stem.isdigit() else None  # .crc, .tmp and the like are not batches


def committed_files(table: Path) -> list[Path] | None:
    """The data files the sink log commits, sorted; None when ``table`` has no sink log."""
    log_dir = table / LOG_DIR
    if not log_dir.is_dir():
        return None
    batches = sorted(
        (n, entry) for entry in log_dir.iterdir() if (n := _batch_number(entry.name)) is not None
    )
    files: set[str] = set()
    for _, entry in batches:  # in batch order, so a later delete undoes an earlier add
        try:
            added, deleted = parse_batch(entry.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue  # compacted away while we listed the folder
        files = (files | added) - deleted
    return sorted({in_table(table, uri) for uri in files})


def data_files(table: Path) -> list[Path]:
    """The table's Parquet files as a reader should see them: what its sink log commits, or,
    for a folder with no log (``device_status``'s snapshots), every ``*.parquet`` in it or in
    its ``name=value`` partitions. Committed files are listed even if gone from disk."""
    committed = committed_files(table)
    if committed is not None:
        return committed
    return sorted(table.glob("*.parquet")) or sorted(table.glob("*=*/*.parquet"))
