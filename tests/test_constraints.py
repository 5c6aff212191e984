"""``constraints.txt`` pins what CI installs: every dependency the project declares must be
pinned there, at a version its declared range admits, or a new dependency (or a widened range)
would reach CI unpinned and a new upload could break the tests unannounced."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {line!r} is not an exact pin (name==version)"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _declared() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    rows = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, reqs in project["optional-dependencies"].items():
        rows += [(extra, Requirement(r)) for r in reqs if not r.startswith("steerable")]
    return rows


def _out_of_date(pins: dict[str, Version], declared: list[tuple[str, Requirement]]) -> list[str]:
    wrong = []
    for where, req in declared:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            wrong.append(f"{req} ({where}) has no pin")
        elif not req.specifier.contains(pin, prereleases=True):
            wrong.append(f"{req} ({where}) is pinned at {pin}, outside its range")
    return wrong


def test_every_declared_dependency_is_pinned_inside_its_range() -> None:
    wrong = _out_of_date(_pins(), _declared())
    assert not wrong, "constraints.txt is out of date:\n" + "\n".join(wrong)


def test_a_missing_pin_and_a_pin_outside_its_range_are_caught() -> None:
    declared = [("dev", Requirement("Typing_Extensions>=4")), ("cli", Requirement("rich>=13,<16")),
                ("dev", Requirement("pytest>=8"))]
    pins = {"typing-extensions": Version("4.12.0"), "rich": Version("16.0.0")}
    assert _out_of_date(pins, declared) == [
        "rich<16,>=13 (cli) is pinned at 16.0.0, outside its range", "pytest>=8 (dev) has no pin"]
