"""``--engine memory|chunked`` on every release command: the same seed gives the same output (Spark's
``--engine spark`` is compared in tests/engines/test_spark_engine.py and tests/releases/)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import main


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    labels = [f"{b}{c}" for b in "ABC" for c in range(4)]
    (tmp_path / "domain.csv").write_text("item,cluster\n" + "".join(f"{x},{x[0]}\n" for x in labels))
    rows = ["user,item,lat,lon,text"]
    for u in range(120):  # grouped by user, as the chunked engine reads runs of whole users
        for _ in range(8):
            words = " ".join(rng.choice(["red", "fox", "Jumps", "over", "dogs"], 3))
            lat, lon = 40.7 + 0.05 * rng.random(), -74.0 + 0.05 * rng.random()
            rows.append(f"u{u:03d},{labels[rng.integers(0, 12)]},{lat:.5f},{lon:.5f},{words}")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def _commands(files):
    data, domain = files / "data.csv", files / "domain.csv"
    seeded = ["--json", "--seed", "4"]
    return {
        "heatmap": cli_argv.heatmap(data, "--bbox", cli_argv.BBOX, "--resolution", "32", "--epsilon", "1", *seeded),
        "distinct": cli_argv.distinct(data, "user", "text", "--tokenize", "--epsilon", "1", *seeded),
        "linear": cli_argv.greatcircle(
            data, "--alpha", "20", "--model", "central", "--samples", "4", "--delta", "1e-6", *seeded
        ),
        "itemwise": cli_argv.clustered("itemwise", data, domain, "--alpha", "8", "--model", "central", *seeded),
        "freq": cli_argv.clustered("freq", data, domain, "--alpha", "30", *seeded),
    }


@pytest.fixture
def small_chunks(monkeypatch):
    """``--engine chunked`` reads chunks of 37 rows (its default, a million rows, would read these 960 rows as one
    chunk: the comparison would never see a user cut between batches); counts the chunks read."""
    import userdp.engines
    from userdp.engines import ChunkedEngine

    chunks = []

    class SmallChunks(ChunkedEngine):
        def __init__(self, rows_per_chunk: int = 37, **duckdb):
            super().__init__(rows_per_chunk, **duckdb)

        def load(self, source, columns, domain=None):
            table = super().load(source, columns, domain)
            return table.then(lambda ds: chunks.append(ds.n_users) or ds)

    monkeypatch.setattr(userdp.engines, "ChunkedEngine", SmallChunks)
    return chunks


@pytest.mark.parametrize("command", ["heatmap", "distinct", "linear", "itemwise", "freq"])
def test_chunked_engine_gives_the_memory_release(command, files, capsys, tmp_path, small_chunks):
    """The same seed gives the same output in memory and in chunks of whole users (many chunks: every user cut
    between two batches is carried whole). Equality is not correctness: the aggregates each engine hands the
    releases are checked against brute force in tests/releases/test_engines_agree.py."""
    argv = _commands(files)[command]
    outs = []
    for engine in ("memory", "chunked"):
        extra = ["--out", str(tmp_path / f"{engine}.png")] if command == "heatmap" else []
        assert main([*argv, *extra, "--engine", engine]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out.pop("engine") == engine
        if command == "heatmap":
            out["grid"] = np.load(out.pop("grid")).tolist()
            out.pop("image")
        outs.append(out)
    assert outs[0] == outs[1]
    assert len(small_chunks) > 10 and sum(small_chunks) % 120 == 0  # many chunks; every pass read the 120 users


def test_unknown_engine_is_refused_by_the_parser(files, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*_commands(files)["freq"], "--engine", "local"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["heatmap", "distinct", "linear", "itemwise", "freq"])
def test_seed_warning_goes_to_stderr_on_every_command(command, files, capsys, tmp_path):
    extra = ["--out", str(tmp_path / "h.png")] if command == "heatmap" else []
    assert main([*_commands(files)[command], *extra]) == 0
    captured = capsys.readouterr()
    assert "seeded noise" in captured.err  # the person at the terminal sees it
    assert json.loads(captured.out)["warning"].startswith("seeded noise")  # and so does whoever reads the JSON
