"""``--out`` and the ledger: an output that cannot be written is refused before any data is read (nothing
released or charged); once a release exists it is charged first, so a write that fails afterwards (a full disk,
whose failure could depend on the release's size) cannot be retried for a free look at the release."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    rows = ["user,item,lat,lon"]
    for u in range(150):
        for _ in range(4):
            lat, lon = 40.70 + 0.05 * rng.random(), -74.0 + 0.05 * rng.random()
            rows.append(f"u{u},w{rng.integers(0, 5)},{lat:.5f},{lon:.5f}")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "add-remove:100:1e-3"]) == 0
    return tmp_path, ledger


def _vocabulary(d, out):
    return ["vocabulary", str(d / "data.csv"), "--user", "user", "--item", "item", "--epsilon", "4", "--delta",
            "1e-5", "--out", str(out)]  # fmt: skip


def _heatmap(d, out):
    return cli_argv.heatmap(d / "data.csv", "--bbox", cli_argv.BBOX, "--resolution", "16", "--epsilon", "1",
                            "--out", str(out))  # fmt: skip


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _entries(ledger) -> int:
    return len(json.loads(ledger.read_text())["entries"])


@pytest.mark.parametrize(
    "command,name", [(_vocabulary, "out.csv"), (_heatmap, "out.png")], ids=["vocabulary", "heatmap"]
)
def test_an_unwritable_folder_is_refused_before_the_data_are_read(files, capsys, command, name, monkeypatch):
    d, ledger = files
    import userdp.releases as releases

    called = []
    monkeypatch.setattr(releases, "vocabulary", lambda *a, **k: called.append(1))
    monkeypatch.setattr(releases, "heatmap", lambda *a, **k: called.append(1))
    assert main([*command(d, d / "nowhere" / name), "--ledger", str(ledger)]) == 2
    assert "nothing was released or charged" in capsys.readouterr().err
    assert called == [] and _entries(ledger) == 0
    assert not [p for p in d.rglob("*userdp-tmp*")]


def test_a_csv_that_fails_after_the_release_is_charged(files, capsys, monkeypatch):
    """A full disk while the vocabulary's CSV is written: exit 2, the message says the release was charged, the
    ledger holds it, and no file (final or temporary) is left."""
    import csv

    d, ledger = files

    monkeypatch.setattr(csv, "writer", _full_disk)
    assert main([*_vocabulary(d, d / "words.csv"), "--ledger", str(ledger)]) == 2
    assert "the release was charged to the ledger but" in capsys.readouterr().err
    assert _entries(ledger) == 1
    assert not (d / "words.csv").exists() and not [p for p in d.rglob("*userdp-tmp*")]


def test_a_map_that_fails_after_the_release_is_charged(files, capsys, monkeypatch):
    import userdp.report.maps as maps

    d, ledger = files

    monkeypatch.setattr(maps, "render_maps", _full_disk)
    assert main([*_heatmap(d, d / "map.png"), "--ledger", str(ledger)]) == 2
    assert "the release was charged to the ledger but" in capsys.readouterr().err
    assert _entries(ledger) == 1
    assert not [p for p in d.iterdir() if p.suffix in (".png", ".npy")] and not [p for p in d.rglob("*userdp-tmp*")]
