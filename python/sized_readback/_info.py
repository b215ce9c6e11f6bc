"""The deprecated shortcut getters of the readback classes (``rb.capacity`` for
``rb.info["capacity"]``), made from ``_native.INFO_FIELDS``: the one description of ``info``
that the compiled module makes each class's ``info`` dict from too. Each entry is
``(name, doc, classes)``; a getter goes on the classes named (those that had one before
``info`` described the setting). Live state (``slots_in_use``, ``GraphReadback.next_seq``,
...) keeps getters of its own."""

from __future__ import annotations

import warnings
from typing import Any

from . import _native


def _shortcut(name: str, doc: str) -> property:
    message = f'the {name} getter is deprecated: use rb.info["{name}"]'

    def get(self: Any) -> Any:
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.info[name]

    get.__name__ = name
    return property(get, doc=f'{doc}\n\nDeprecated: use ``info["{name}"]``.')


def _install() -> None:
    for name, doc, classes in _native.INFO_FIELDS:
        for cls in classes:
            setattr(getattr(_native, cls), name, _shortcut(name, doc))


_install()
