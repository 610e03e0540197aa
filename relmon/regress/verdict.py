"""Whether a `relmon regress` run passes, its exit status, and the line that says why: a plain function of the
summary, the items missing from the candidates file and the options.

The exit statuses keep the command's convention (relmon.regress.command): 1 is a regression and only that (the
pass rate below --min-pass, or an item that passed in the baseline now fails); golden items missing from the
candidates file are an input problem, 2, unless --allow-missing, and a regression found among the items judged
still says 1."""

from __future__ import annotations

from dataclasses import dataclass

from golden.regress import Summary, exit_status

REGRESSION, INCOMPLETE = 1, 2


@dataclass(frozen=True)
class RunVerdict:
    code: int  # 0 passed; REGRESSION; INCOMPLETE
    failing: tuple[str, ...]  # why it failed, most telling first
    context: tuple[str, ...]  # the rest the line says (the pass rate that was good enough, missing items allowed)

    @property
    def passed(self) -> bool:
        return self.code == 0

    @property
    def line(self) -> str:
        """ "FAIL: pass rate 60% < 80% required; 1 item missing (use --allow-missing to run without it)"."""
        return ("PASS: " if self.passed else "FAIL: ") + "; ".join(self.failing + self.context)


def percents(rate: float, required: float) -> tuple[str, str]:
    """The pass rate and the minimum as percentages, with as many decimals as it takes to tell them apart (79.5%
    is not "80% < 80%")."""
    for decimals in range(4):
        shown = f"{rate:.{decimals}%}", f"{required:.{decimals}%}"
        if rate == required or shown[0] != shown[1]:
            return shown
    return shown


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def decide(
    summary: Summary, min_pass: float, *, missing: int, allow_missing: bool, baseline: int | str | None
) -> RunVerdict:
    """The run's verdict: `missing` golden items had no answer in the candidates file; `baseline` the run id or
    report file compared with (None: none)."""
    failing: list[str] = []
    context: list[str] = []
    rate, required = percents(summary.pass_rate, min_pass)
    if summary.pass_rate < min_pass:
        failing.append(f"pass rate {rate} < {required} required")
    else:
        context.append(f"pass rate {rate} ≥ {required} required")
    since = f"run {baseline}" if isinstance(baseline, int) else baseline
    if summary.regressed:
        failing.append(f"{_items(summary.regressed)} regressed (passed in {since}, fail now)")
    elif baseline is not None:
        context.append(f"nothing regressed since {since}")
    code = exit_status(summary, min_pass)  # 1 or 0: the judged items' verdict
    if missing:
        them = "it" if missing == 1 else "them"
        if allow_missing:
            context.append(f"{_items(missing)} missing, not run (--allow-missing)")
        else:
            failing.append(f"{_items(missing)} missing (use --allow-missing to run without {them})")
            code = code or INCOMPLETE
    return RunVerdict(code, tuple(failing), tuple(context))
