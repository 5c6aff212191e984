"""The documentation site builds with ``mkdocs build --strict`` (a broken link, anchor, snippet
or API reference fails), and every public name is in its API reference.

Outside CI the test skips when the ``docs`` extra is not installed; CI installs it and sets
``STEERABLE_REQUIRE_DOCS=1``, so there a missing MkDocs is a failure.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._components import missing

ROOT = Path(__file__).resolve().parents[2]
# Each public module and the reference page that documents it.
PAGES = {
    "steerable": "core", "steerable.errors": "errors", "steerable.tools": "tools",
    "steerable.providers": "providers", "steerable.storage": "storage",
    "steerable.coding": "coding", "steerable.replay": "replay", "steerable.scale": "scale",
    "steerable.temporal": "temporal",
    "steerable.server": "server", "steerable.integrations.otel": "integrations",
    "steerable.integrations.mcp": "integrations",
}


# The strict build takes ~10 s quiet and over 60 s (the suite's per-test limit) at load 15;
# its own subprocess timeout (300 s) is the bound that matters.
pytestmark = pytest.mark.timeout(360)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        importlib.import_module("mkdocstrings")
        importlib.import_module("material")
    except ImportError:
        missing("DOCS", "the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_every_public_name_is_in_the_reference(site: Path) -> None:
    missing = []
    for module, page in PAGES.items():
        html = (site / "reference" / page / "index.html").read_text()
        anchors = set(re.findall(r'id="([\w.]+)"', html))
        names = importlib.import_module(module).__all__
        missing += [f"{module}.{n}" for n in names if f"{module}.{n}" not in anchors]
    assert not missing, f"not in the API reference: {missing}"


def test_the_examples_page_includes_every_example(site: Path) -> None:
    html = (site / "examples" / "index.html").read_text()
    for script in sorted((ROOT / "examples").glob("*.py")):
        first_line = script.read_text().splitlines()[0].strip('"')
        assert first_line[:40] in html, f"examples page lacks {script.name}"
