"""Input errors that name the file, the object and the field.

Every user-facing validation failure is an :class:`InputError`. Its ``str`` is one line,
``FILE: KIND NAMESPACE/NAME: FIELD: MESSAGE``, which the CLI prints before exiting 2.
"""

from __future__ import annotations


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
        self.message = message
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
