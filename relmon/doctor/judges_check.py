"""The doctor's look at the team's own judges (RELMON_JUDGES_DIR): each broken file is a warning, with its line
and what to fix, and is left out of judging; a judge named in RELMON_JUDGES that does not exist is one too."""

from __future__ import annotations

from collections.abc import Iterator

from relmon.doctor.checks import Check, ok, skip, warn
from store.judge_catalog import judge_catalog, unknown_judges
from store.settings import Settings

NAME = "custom judges"


def check_judges(settings: Settings) -> Iterator[Check]:
    catalog = judge_catalog(settings)
    unknown = unknown_judges(settings, list(settings.default_judges))
    if settings.judges_dir is None and not unknown:
        yield skip(NAME, "RELMON_JUDGES_DIR is not set: the seed judges only")
        return
    for problem in catalog.problems:
        yield warn(NAME, f"left out: {problem}", "correct the file (`relmon judges check` shows every problem)")
    for name in unknown:
        yield warn(NAME, f"RELMON_JUDGES names {name!r}, which is no judge: left out", "correct RELMON_JUDGES")
    if catalog.specs:
        yield ok(NAME, f"{len(catalog.specs)} loaded: {', '.join(catalog.specs)}")
    elif not catalog.problems and settings.judges_dir is not None:
        yield warn(NAME, f"no judge files (*.toml) in {settings.judges_dir}", "add one or unset RELMON_JUDGES_DIR")
