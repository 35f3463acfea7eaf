"""The README's Python examples run as written (except the one that reads a user's own file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# blocks that need a cluster (s3:// paths) are documentation, not runnable here
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "s3://" not in b]


def test_readme_starts_with_the_two_commands():
    head = README.read_text().split("---")[0]
    assert "userdp demo" in head and re.search(r"pytest\s+# tests$", head, re.M)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write files
    code = re.sub(r"pts = UserDataset\.from_file\(.*?\)\)\n", "", block, flags=re.S)
    env: dict = {}
    if "Session" in code:  # the budget example continues the data-model example
        data_block = next(b for b in BLOCKS if "UserDataset.from_table" in b)
        exec(data_block.split("pts =")[0], env)
    exec(code, env)
