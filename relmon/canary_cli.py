"""`relmon canary`: re-judge the labelled canary set now, store the run, and post "the judge moved" if it did."""

from __future__ import annotations

import argparse

from common.runtime import Runtime, set_runtime
from store.models import CanaryRun
from store.settings import Settings


def run_canary_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers import canary

    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        runtime.db.migrate()
        # The seed canary, then each team judge with a labelled file (judges.d), each a run of its own.
        for run_id in [canary.run(runtime), *canary.run_team(runtime)]:
            outcome = canary.announce(runtime, run_id) if not args.no_post else "not posted (--no-post)"
            with runtime.db.session() as session:
                stored = session.get(CanaryRun, run_id)
                kappa = "n/a" if stored.kappa is None else f"{stored.kappa:.2f}"
                exact = "n/a" if stored.exact_agreement is None else f"{stored.exact_agreement:.2f}"
                print(
                    f"canary run {run_id}: {stored.judge} judge, model {stored.model} "
                    f"(configured {stored.configured_model}), "
                    f"prompt {stored.prompt_version}: {stored.scored} of {stored.examples} scored, "
                    f"exact agreement {exact}, weighted kappa {kappa}"
                )
                print(f"the judge moved: {stored.moved} ({outcome})" if stored.moved else "the judge held steady")
        return 0
    finally:
        runtime.db.dispose()
        set_runtime(None)
