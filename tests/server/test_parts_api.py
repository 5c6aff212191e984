"""The message API with content parts: images and files in base64, checked before anything
runs; the session shows them as placeholders and summaries, never their bytes."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from steerable import Reply
from tests.server.conftest import serving

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_the_api_takes_parts_and_refuses_bad_ones(tmp_path: Path) -> None:
    async with serving(tmp_path, [Reply(text="ok")]) as s:
        data = base64.b64encode(PNG).decode()
        bad = await s.client.post("/v1/sessions/s1/messages", json={
            "text": "x", "parts": [{"type": "image", "data": data}]})
        assert bad.status_code == 400 and "part 0" in bad.json()["error"]
        assert "media_type" in bad.json()["error"]
        worse = await s.client.post("/v1/sessions/s1/messages", json={
            "parts": [{"type": "image", "media_type": "image/png", "data": "not base64!"}]})
        assert worse.status_code == 400 and "base64" in worse.json()["error"]
        ok = await s.client.post("/v1/sessions/s1/messages", json={
            "parts": [{"type": "image", "media_type": "image/png", "data": data}]})
        assert ok.status_code == 202, ok.text
        for _ in range(100):
            got = (await s.client.get("/v1/sessions/s1")).json()
            if len(got.get("messages", [])) == 2:
                break
            await asyncio.sleep(0.05)
        user = got["messages"][0]
        assert user["content"] == "[image: image/png, 1.0 KB]"
        assert user["parts"] == [{"type": "image", "media_type": "image/png", "size": len(PNG)}]
        assert json.dumps(got).count(data[:40]) == 0  # the bytes stay stored
