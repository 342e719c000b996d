"""Dates as integers, for the per-prompt hook's path (``datetime`` costs it a millisecond).

The hook reads the times of notes mdmem wrote (``2026-11-29T10:12:00+00:00``)
and shows a recalled note's date (``2026-11-29``); both are a few integer
operations on the proleptic Gregorian calendar ``datetime`` uses (H. Hinnant's
``days_from_civil`` and ``civil_from_days``). Property tests hold them to
``datetime``.
"""

from __future__ import annotations

__all__ = ["days", "iso_date"]


def days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to that date (negative before it)."""
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146_097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719_468


def iso_date(seconds: float) -> str:
    """The UTC date of a moment given as seconds since the epoch, as ``YYYY-MM-DD``
    (``datetime.fromtimestamp(seconds, timezone.utc).date().isoformat()``, which first
    rounds the moment to a microsecond, half to even)."""
    whole = int(seconds)
    micros = round((seconds - whole) * 1e6)
    whole += 1 if micros >= 1_000_000 else -1 if micros < 0 else 0
    z = whole // 86_400 + 719_468
    era = z // 146_097
    of_era = z - era * 146_097
    year_of_era = (of_era - of_era // 1_460 + of_era // 36_524 - of_era // 146_096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted = (5 * of_year + 2) // 153
    day = of_year - (153 * shifted + 2) // 5 + 1
    month = shifted + (3 if shifted < 10 else -9)
    year = year_of_era + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}"
