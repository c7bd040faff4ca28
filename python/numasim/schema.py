"""One line for the first problem pydantic found in a data file (experiment files, mix files):
the file, the key path and what is wrong, as every bad input in numasim reads."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from numasim._core import InputError


def first_error(
    origin: str,
    e: ValidationError,
    allowed_at: Callable[[tuple[Any, ...]], Iterable[str]],
    messages: dict[str, str] | None = None,
) -> InputError:
    """The first error of ``e`` as an InputError naming ``origin`` and the key path.

    ``allowed_at(loc)`` lists the keys allowed beside an unknown key at ``loc``; ``messages``
    gives the text for error types the caller words itself (``{"too_short": "is empty"}``).
    """
    err = e.errors()[0]
    path = ".".join(str(part) for part in err["loc"])
    if err["type"] == "extra_forbidden":
        allowed = ", ".join(allowed_at(err["loc"]))
        return InputError(f"{origin}: unknown key '{path}'; allowed: {allowed}")
    if err["type"] == "missing":
        return InputError(f"{origin}: missing key '{path}'")
    if messages and err["type"] in messages:
        return InputError(f"{origin}: {path}: {messages[err['type']]}")
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    return InputError(f"{origin}: {path}: {err['msg'].removeprefix('Input ')}{shown}")
