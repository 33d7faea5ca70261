"""Trace CSVs read strictly, with one-line errors that name the file, the row and the column.

Design: a trace file is small enough (≤ 4 MB here) to read whole with the C-backed :mod:`csv`
reader. :func:`read_table` checks, before any row is converted:

- the file exists, is a file, is UTF-8 text and has a header row;
- every header column is known (required or optional) and each required column is present;
- every data row has as many fields as the header. A short *last* row, or a header without
  data rows, is reported as a truncated file.

Rows are numbered from 1 for the first data row (row N is line N + 1 of the file). Trailing
blank lines are ignored; a blank line between rows is an error. Converters then report
``FILE: row N: COLUMN: 'x' is not an integer`` through :meth:`Table.error`. Loaders that
convert many rows convert a whole row inside one ``try`` and only on failure call the field
parsers below, which find the offending column: the common path stays cheap.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.api.errors import InputError


@dataclass(frozen=True, slots=True)
class Table:
    """A checked CSV: its source path, column positions and data rows (all strings)."""

    source: str
    columns: dict[str, int]
    rows: list[list[str]]

    def has(self, column: str) -> bool:
        return column in self.columns

    def error(self, row: int, column: str, message: str) -> InputError:
        """An error located at data row ``row`` (1-based) and ``column``."""
        return InputError(message, source=self.source, obj=f"row {row}", field=column)

    def text(self, fields: Sequence[str], column: str) -> str:
        """The raw field (``""`` when the file lacks the optional column)."""
        index = self.columns.get(column)
        return "" if index is None else fields[index]

    def integer(
        self,
        row: int,
        fields: Sequence[str],
        column: str,
        *,
        minimum: int | None = None,
        maximum: int = 2**53,
    ) -> int:
        """An integer cell; at most ``maximum`` (default 2^53), so that amounts derived from it
        stay within int64."""
        text = self.text(fields, column)
        try:
            value = int(text)
        except ValueError:
            raise self.error(row, column, f"{text[:40]!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise self.error(row, column, f"{value} is below the minimum {minimum}")
        if value > maximum:
            raise self.error(row, column, f"{text[:40]} is above the maximum {maximum}")
        return value

    def number(
        self, row: int, fields: Sequence[str], column: str, *, minimum: float | None = None
    ) -> float:
        text = self.text(fields, column)
        try:
            value = float(text)
        except ValueError:
            raise self.error(row, column, f"{text!r} is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(row, column, f"{text!r} is not a finite number")
        if minimum is not None and value < minimum:
            raise self.error(row, column, f"{text} is below the minimum {minimum:g}")
        return value

    def optional_integer(
        self, row: int, fields: Sequence[str], column: str, *, minimum: int | None = None
    ) -> int | None:
        if not self.text(fields, column):
            return None
        return self.integer(row, fields, column, minimum=minimum)


def _open_text(source: str) -> list[list[str]]:
    try:
        with open(source, encoding="utf-8-sig", newline="") as handle:
            return list(csv.reader(handle, strict=True))
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", source=source) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason}", source=source) from None
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=source) from None


def read_table(
    path: str | os.PathLike[str],
    required: Sequence[str],
    optional: Sequence[str] = (),
) -> Table:
    """Read and check a CSV file (see the module docstring)."""
    source = os.fspath(path)
    lines = _open_text(source)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise InputError("empty file: no header row (truncated file?)", source=source)
    header, rows = lines[0], lines[1:]
    columns: dict[str, int] = {}
    known = (*required, *optional)
    for index, name in enumerate(header):
        if name in columns:
            raise InputError(f"duplicate column {name!r}", source=source, field=name)
        if name not in known:
            raise InputError(
                f"unknown column {name!r} (known columns: {', '.join(known)})",
                source=source,
                field=name,
            )
        columns[name] = index
    for name in required:
        if name not in columns:
            raise InputError(f"missing required column {name!r}", source=source, field=name)
    if not rows:
        raise InputError("header only, no data rows (truncated file?)", source=source)
    width = len(header)
    last = len(rows)
    for number, fields in enumerate(rows, start=1):
        if len(fields) == width:
            continue
        if not fields:
            raise InputError("blank line between rows", source=source, obj=f"row {number}")
        if number == last and len(fields) < width:
            message = f"{len(fields)} of {width} fields (truncated file?)"
        else:
            message = f"{len(fields)} fields, expected {width} ({', '.join(header)})"
        raise InputError(message, source=source, obj=f"row {number}")
    return Table(source=source, columns=columns, rows=rows)
