"""The judges in force for these settings: the seed judges and the team's own (RELMON_JUDGES_DIR, read by
judges.judge_files). Read once per process and read again when a file changes (its name, size or modification
time), so an edited prompt is judged with from the next pair on; a broken file is left out and logged once."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from judges.judge_files import JudgeCatalog, judge_files, load_catalog
from store.settings import Settings

log = logging.getLogger("relmon.judges")


def _stamp(directory: Path | None) -> tuple:
    """What changes when a judge file is added, removed or edited."""
    if directory is None or not directory.is_dir():
        return ()
    stamp = []
    for path in judge_files(directory):
        try:
            info = path.stat()
        except OSError:
            continue
        stamp.append((path.name, info.st_size, info.st_mtime_ns))
    return tuple(stamp)


@functools.lru_cache(maxsize=8)
def _load(directory: Path | None, max_prompt_chars: int, stamp: tuple) -> JudgeCatalog:
    catalog = load_catalog(directory, max_prompt_chars=max_prompt_chars)
    for problem in catalog.problems:
        # The log's scrubber withholds long messages (they may quote people's texts): the message names the file
        # and line, the problem itself is a field of its own.
        where = f"{Path(problem.path).name}:{problem.line}" if problem.line is not None else Path(problem.path).name
        log.warning(
            "custom judge left out: %s", where, extra={"judge_file": problem.path, "problem": problem.message[:300]}
        )
    if catalog.specs:
        log.info("custom judges loaded: %s", ", ".join(catalog.specs), extra={"judges_dir": str(directory)})
    return catalog


def judge_catalog(settings: Settings) -> JudgeCatalog:
    directory = settings.judges_dir
    return _load(directory, settings.max_prompt_chars, _stamp(directory))


def unknown_judges(settings: Settings, names: list[str]) -> list[str]:
    """The names of RELMON_JUDGES (or a channel's `judges:`) that are no judge here: left out of judging."""
    known = set(judge_catalog(settings).names)
    return [name for name in names if name not in known]


def announce_judges(settings: Settings) -> None:
    """At start-up: the team's judges are read (a broken file is logged and left out, by `_load`), and a name in
    RELMON_JUDGES that is no judge is logged: judging leaves it out."""
    for name in unknown_judges(settings, list(settings.default_judges)):
        log.warning("RELMON_JUDGES names no judge %r: left out (run `relmon judges check`)", name)
