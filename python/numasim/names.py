"""The one way a name (an experiment's, a workload's, a machine's) becomes part of a file name.

Names come from experiment files and the command line; only ``file_part`` turns them into file
names, so a name such as ``../../x`` or one with a ``/`` or a control character never writes
outside the output directory.

1. Every character other than a letter, a digit, ``.``, ``_``, ``+`` and ``-`` becomes ``_``.
2. Leading dots are dropped (no hidden files, no ``..``); an empty result is ``_``.
3. The result is cut to ``MAX_PART`` characters (file systems take 255 bytes a name).
"""

from __future__ import annotations

import re

#: The longest part a name gives a file name; a file name joins a few of them.
MAX_PART = 60
_UNSAFE = re.compile(r"[^\w.+-]|[^\x20-\x7e]", re.ASCII)


def file_part(name: str) -> str:
    """``name`` made safe as (part of) one file name, as described above."""
    safe = _UNSAFE.sub("_", name).lstrip(".")[:MAX_PART]
    return safe or "_"


def file_stem(*names: str) -> str:
    """The parts joined by ``-``, each made safe by ``file_part``."""
    return "-".join(file_part(n) for n in names)
