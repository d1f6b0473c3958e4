"""msgspec's decoding info for a type, built once, in one thread, at import.

msgspec builds what it needs to decode or convert into a Struct (its
fields' types, read with ``typing.get_type_hints``) on the type's first
decode or convert, and keeps it on the class. That build runs Python code,
so the GIL can pass to another thread part-way through, and msgspec (0.22)
lets that thread use the half-built info: two request threads converting a
type for the first time crashed a scheduler worker with SIGSEGV (issue 28).
Once built, the info is only read and sharing it is safe; encoding needs
none.

So every type that service code decodes or converts is declared here, at
module level: ``decoder(T)`` for JSON bytes, ``converter(T)`` for Python
objects. Each builds the info of T and of every type inside it when its
module is imported (before any function of that module can run), under one
lock, since two threads importing two modules may build a type both use.
A test keeps service code from calling msgspec's decoders any other way.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_lock = threading.Lock()
_built: dict[Any, None] = {}  # the types built here, in order (a dict as an ordered set)


def decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    """``msgspec.json.Decoder(kind)``: building one builds ``kind``'s info."""
    with _lock:
        made = msgspec.json.Decoder(kind)
        _built.setdefault(kind, None)
    return made


def converter(kind: type[T]) -> Callable[[Any], T]:
    """``msgspec.convert(obj, kind)`` as a function of ``obj``, ``kind``'s
    info built now (``convert`` uses the info a decoder builds)."""
    decoder(kind)

    def convert(obj: Any) -> T:
        return msgspec.convert(obj, kind)

    return convert


def built() -> tuple[Any, ...]:
    """The types declared so far (those of the modules imported)."""
    with _lock:
        return tuple(_built)
