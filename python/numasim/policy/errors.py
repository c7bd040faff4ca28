"""The traceback of an exception a Python policy raised, as its author wants to read it: the
frames of the policy's own code (and what it called), not numasim's."""

from __future__ import annotations

import traceback
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent.parent)


def user_traceback(e: BaseException) -> str:
    """``e``'s traceback without the frames of numasim's own package."""
    tb = traceback.extract_tb(e.__traceback__)
    kept = traceback.StackSummary.from_list(
        [f for f in tb if not str(Path(f.filename).resolve()).startswith(_PACKAGE)]
    )
    lines = ["Traceback (most recent call last):\n", *kept.format()]
    lines += traceback.format_exception_only(type(e), e)
    return "".join(lines)
