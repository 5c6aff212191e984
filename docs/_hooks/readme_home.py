"""MkDocs hook: the site's home page is the README, with its links made relative to the site.

The README links into ``docs/`` so that it reads on a forge; the site serves those pages from
its root. One text for both keeps the two from drifting apart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != "index.md":
        return markdown
    text = README.read_text(encoding="utf-8")
    text = text.replace("](docs/", "](")
    # The examples folder is not part of the site: its page includes every script.
    return re.sub(r"\]\(examples/?\)", "](examples.md)", text)
