"""``python -m billeting.placement.openapi [--check]``: rewrite the shipped
``openapi.json`` from ``document.build()``, or (``--check``) exit 1 when it
differs."""
from __future__ import annotations

import sys
from importlib import resources

from billeting.placement.openapi import FILE_NAME
from billeting.placement.openapi.document import build, render


def main(argv: list[str]) -> int:
    target = resources.files("billeting.placement.openapi").joinpath(FILE_NAME)
    wanted = render(build())
    if "--check" in argv:
        if target.read_bytes() != wanted:
            print(f"{target} is out of date: run python -m billeting.placement.openapi", file=sys.stderr)
            return 1
        return 0
    with open(str(target), "wb") as out:
        out.write(wanted)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
