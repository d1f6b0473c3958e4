"""The runnable command blocks of README.md and docs/.

A fenced block preceded by ``<!-- run: NAME -->`` is run by
``test_command_blocks.py``. Blocks of one file with the same NAME are one
script, in order, so prose can sit between the steps of a session. Options
after the name:

* ``in-repo``    run from the repository root (the block reads files there and
                 must write none); otherwise a fresh empty directory;
* ``timeout=N``  seconds the script may take (default 180).

``sh``/``bash``/``console`` blocks run under ``bash -e``, ``python`` blocks
under this interpreter. A block that needs what a test cannot give (a
RabbitMQ vhost, a long-running service of the reader's) is simply not marked.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!--\s*run:\s*(?P<name>[\w.-]+)(?P<options>[^>]*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>`{3,})\s*(?P<lang>[\w-]*)\s*$")
SHELLS = {"sh", "bash", "console", "shell"}


@dataclass
class Script:
    source: Path            # the Markdown file
    name: str
    lang: str               # "sh" or "python"
    line: int               # first block's line (1-based)
    in_repo: bool = False
    timeout: float = 180.0
    parts: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.name}"

    @property
    def text(self) -> str:
        return "\n".join(self.parts)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def scripts(path: Path) -> list[Script]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: dict[str, Script] = {}
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        i += 1
        if not marker:
            continue
        while i < len(lines) and not lines[i].strip():
            i += 1
        fence = FENCE.match(lines[i]) if i < len(lines) else None
        if not fence:
            raise ValueError(f"{path}:{i}: a run marker must be followed by a fenced block")
        lang = "sh" if fence["lang"] in SHELLS else fence["lang"]
        if lang not in ("sh", "python"):
            raise ValueError(f"{path}:{i + 1}: cannot run a {fence['lang']!r} block")
        start, i = i + 1, i + 1
        while i < len(lines) and lines[i].strip() != fence["fence"]:
            i += 1
        body = "\n".join(lines[start:i]) + "\n"
        i += 1
        name = marker["name"]
        options = marker["options"].split()
        script = found.get(name)
        if script is None:
            script = found[name] = Script(source=path, name=name, lang=lang, line=start)
        elif script.lang != lang:
            raise ValueError(f"{path}:{start}: script {name!r} mixes {script.lang} and {lang} blocks")
        for option in options:
            if option == "in-repo":
                script.in_repo = True
            elif option.startswith("timeout="):
                script.timeout = float(option.split("=", 1)[1])
            else:
                raise ValueError(f"{path}:{start}: unknown run option {option!r}")
        script.parts.append(body)
    return list(found.values())


def all_scripts() -> list[Script]:
    return [script for path in documents() for script in scripts(path)]
