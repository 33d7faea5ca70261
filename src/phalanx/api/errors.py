"""Input errors that name the file, the object and the field.

Every user-facing validation failure is an :class:`InputError`. Its ``str`` is one line,
``FILE: KIND NAMESPACE/NAME: FIELD: MESSAGE``, which the CLI prints before exiting 2.
"""

from __future__ import annotations

import re

#: A quoted value longer than 80 characters in a message; it is cut to 77 and "...". A quote
#: opens only where no letter or digit precedes it: the apostrophe of "cluster's" opens nothing.
_LONG_QUOTED = re.compile(r"""(?<!\w)'([^'\n]{77})[^'\n]{4,}'|(?<!\w)"([^"\n]{77})[^"\n]{4,}\"""")


def shorten(message: str) -> str:
    """``message`` on one line with each quoted value cut to at most 80 characters."""
    flat = " ".join(message.split())
    return _LONG_QUOTED.sub(lambda m: f"'{m[1] or m[2]}...'", flat)


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters; a container is named, not printed (it may
    be nested thousands deep)."""
    if isinstance(value, list | tuple | dict | set):
        return f"a {type(value).__name__} of {len(value)}"
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a number too long to print"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class InputError(ValueError):
    """A bad manifest, trace row or option, located as precisely as we can."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        obj: str = "",
        field: str = "",
    ) -> None:
        self.message = shorten(message)
        self.source = source
        self.obj = obj
        self.field = field
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        return ": ".join([*parts, self.message])

    def lines(self) -> list[str]:
        """What to print, one line per problem."""
        return [self.line()]

    def located(self, *, source: str = "", obj: str = "", field: str = "") -> InputError:
        """A copy with missing location parts filled in (inner parts win)."""
        inner_field = self.field
        if field and inner_field:
            joined = (
                f"{field}.{inner_field}" if not inner_field.startswith("[") else field + inner_field
            )
        else:
            joined = field or inner_field
        return InputError(
            self.message,
            source=self.source or source,
            obj=self.obj or obj,
            field=joined,
        )


#: How many bad objects one run reports before giving up.
MAX_REPORTED = 20


class InputErrors(InputError):
    """Several bad objects at once: the first :data:`MAX_REPORTED`, one line each."""

    def __init__(self, errors: list[InputError]) -> None:
        first = errors[0]
        super().__init__(first.message, source=first.source, obj=first.obj, field=first.field)
        self.errors = errors

    def lines(self) -> list[str]:
        shown = [error.line() for error in self.errors[:MAX_REPORTED]]
        more = len(self.errors) - MAX_REPORTED
        if more > 0:
            shown.append(f"... and {more} more bad object{'s' * (more > 1)}")
        return shown
