"""The page with attachments and streamed tool arguments, in Chromium: the attach button sends
an image with the message (and the session keeps it), and a long write grows on the page while
the model writes it, replaced by the call's card once it runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from steerable import ImagePart, Message, Reply, TextPart
from tests.server.conftest import gate_tools, serving
from tests.server.test_browser import browser, open_page, send

__all__ = ["browser"]  # the fixture, shared with test_browser

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_attach_an_image_and_send_it(tmp_path: Path, browser: Any) -> None:
    (tmp_path / "cat.png").write_bytes(PNG)
    async with serving(tmp_path, [Reply(text="A cat.")]) as s:
        page = await open_page(browser, s.url)
        await page.set_input_files("#attach-file", str(tmp_path / "cat.png"))
        chip = page.locator("#attached .chip")
        await chip.wait_for()
        assert "cat.png · 1.0 KB" in await chip.inner_text()
        assert await chip.locator("img.thumb").count() == 1
        await send(page, "what is this?")
        await page.wait_for_selector(".turn-end >> text=completed")
        await page.wait_for_selector(".msg.user >> text=[image: image/png, 1.0 KB]")
        assert await page.locator("#attached .chip").count() == 0  # sent: no longer attached
        sent = s.provider.requests[0].messages[-1]
        assert sent == Message("user", [TextPart("what is this?"),
                                        ImagePart(data=PNG, media_type="image/png")])
        # Kept beside the session, by hash; the history shows a chip for it after a reload.
        (blob,) = (s.store_dir / f"{page.url.split('session=')[1]}.blobs").iterdir()
        assert blob.read_bytes() == PNG
        await page.reload()
        await page.wait_for_selector(".msg.user .chip >> text=image: image/png · 1.0 KB")
        assert page.errors == []


async def test_a_removed_attachment_is_not_sent(tmp_path: Path, browser: Any) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    (tmp_path / "b.txt").write_text("note")
    async with serving(tmp_path, [Reply(text="ok")]) as s:
        page = await open_page(browser, s.url)
        await page.set_input_files("#attach-file", [str(tmp_path / "a.png"),
                                                    str(tmp_path / "b.txt")])
        await page.locator("#attached .chip").nth(1).wait_for()
        await page.click('#attached .chip[data-name="a.png"] .chip-drop')
        await send(page, "read it")
        await page.wait_for_selector(".turn-end >> text=completed")
        parts = s.provider.requests[0].messages[-1].parts
        assert [type(p).__name__ for p in parts] == ["TextPart", "FilePart"]
        assert page.errors == []


LONG = "".join(f"line {i}\n" for i in range(300))


async def test_a_long_write_grows_on_the_page_until_its_card_replaces_it(
        tmp_path: Path, browser: Any) -> None:
    script = [Reply(tool_calls=[("write", {"path": "notes.md", "content": LONG})],
                    argument_pieces=30, piece_delay=0.1),
              Reply(text="Written.")]
    written: dict[str, str] = {}
    async with serving(tmp_path, script, gate_tools(asyncio.Event(), written)) as s:
        page = await open_page(browser, s.url)
        await send(page, "write the notes")
        line = page.locator(".writing")
        await line.wait_for()
        seen = set()
        while await line.count() and len(seen) < 4:
            text = await line.first.inner_text()
            assert text.startswith("writing write notes.md … ")
            seen.add(text)
            await asyncio.sleep(0.15)
        assert len(seen) >= 3  # it grew while the model wrote
        await page.wait_for_selector(".turn-end >> text=completed")
        assert await page.locator(".writing").count() == 0  # replaced by the call's card
        assert await page.locator(".card[data-call]").count() == 1
        assert written["notes.md"] == LONG
        assert page.errors == []
