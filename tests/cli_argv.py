"""Command lines shared by the CLI tests (the data and query flags each test file repeats)."""

from __future__ import annotations

from pathlib import Path

BBOX = "40.69,-74.01,40.76,-73.94"  # a public box around the test points (lat 40.70-40.75, lon -74.0 to -73.95)


def heatmap(path: Path, *extra: str) -> list[str]:
    """``userdp heatmap`` on a (user, lat, lon) file."""
    return ["heatmap", str(path), "--user", "user", "--lat", "lat", "--lon", "lon", *extra]


def distinct(path: Path, user: str, item: str, *extra: str) -> list[str]:
    return ["distinct", str(path), "--user", user, "--item", item, *extra]


def clustered(command: str, data: Path, domain: Path, *extra: str) -> list[str]:
    """``userdp itemwise|freq`` on a (user, item) file with a public clustered domain file."""
    return [
        command,
        str(data),
        "--user",
        "user",
        "--item",
        "item",
        "--metric",
        "clustered",
        "--domain",
        str(domain),
        *extra,
    ]


def greatcircle(data: Path, *extra: str) -> list[str]:
    """``userdp linear``: the distance to a public point, great-circle metric on a public NYC box."""
    return [
        "linear", str(data), "--user", "user", "--items", "lat,lon", "--metric", "greatcircle",
        "--bbox", "40.5,-74.3,41,-73.65", "--point", "40.75,-73.98", *extra,
    ]  # fmt: skip
