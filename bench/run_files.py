"""A benchmark run's three files: ``<name>.json`` (everything), ``.md`` (the tables), ``.png``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_run(
    doc: dict[str, Any],
    out_dir: Path,
    name: str,
    markdown: Callable[[dict[str, Any]], str],
    plot: Callable[[dict[str, Any], Path], None],
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.json", out_dir / f"{name}.md", out_dir / f"{name}.png"]
    paths[0].write_text(json.dumps(doc, indent=1) + "\n")
    paths[1].write_text(markdown(doc))
    plot(doc, paths[2])
    return paths
