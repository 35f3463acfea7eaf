"""MkDocs hooks for the documentation site (``hooks:`` in ``mkdocs.yml``).

* The experiments' figures and CSV files (``experiments/results/*.png``, ``*.csv``) are published with the
  site at ``experiments/results/``, so ``docs/experiments.md`` shows the committed results without a copy
  in ``docs/`` (which would go stale).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PUBLISHED = ("experiments/results/*.png", "experiments/results/*.csv")


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    root = Path(config["config_file_path"]).resolve().parent
    for pattern in PUBLISHED:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            if files.get_file_from_path(rel) is None:
                files.append(File(rel, src_dir=str(root), dest_dir=config["site_dir"], use_directory_urls=False))
    return files
