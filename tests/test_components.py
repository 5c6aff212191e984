"""The one rule for a missing component: skip outside CI, fail where CI requires it."""

from __future__ import annotations

import pytest

from tests._components import missing


def test_a_missing_component_skips_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEERABLE_REQUIRE_THING", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no thing here"):
        missing("THING", "no thing here")
    monkeypatch.setenv("STEERABLE_REQUIRE_THING", "1")
    with pytest.raises(pytest.fail.Exception, match="STEERABLE_REQUIRE_THING=1 but no thing here"):
        missing("THING", "no thing here")
