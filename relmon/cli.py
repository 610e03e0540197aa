"""The `relmon` command: one entry point, one subcommand per job. Each subcommand lives in its own module;
this file only declares the arguments and dispatches (imports are lazy so `relmon judge` stays light)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from judges.names import JUDGE_NAMES, RELEVANCY
from store.settings import Settings, invalid_settings_message

# The operator's outputs leave out the text of private channels', DMs' and Slack Connect channels' items (counted,
# not quoted) unless asked: the file or terminal may be shared beyond those channels' members.
_INCLUDE_PRIVATE = "show the questions and answers of private channels, DMs and Slack Connect channels too"


def whole_number(text: str) -> int:
    """A number argument in the digits 0–9 (an optional minus first): int() alone also reads "١٢" or "１２" as 12, so
    an id or a count typed in another script would be guessed instead of refused."""
    digits = text.strip().removeprefix("-")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in the digits 0-9")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relmon", description="Watch a support bot in Slack and judge how well it answers."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="all in one: bot, worker and beat (embedded Redis and SQLite)")
    run.add_argument("--port", type=whole_number, default=3000, help="HTTP port for Slack events (default 3000)")

    bot = commands.add_parser("bot", help="the Slack app: HTTP on --port, or Socket Mode with SLACK_APP_TOKEN")
    bot.add_argument("--port", type=whole_number, default=3000, help="HTTP port for Slack events (default 3000)")
    bot.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")

    commands.add_parser("worker", help="a Celery worker that judges captured answers")
    commands.add_parser("beat", help="the scheduler (weekly digest, retention); run exactly one")

    judge = commands.add_parser("judge", help="judge one question and answer now and print the verdict")
    judge.add_argument("--question", "-q", help="the question (or '-' to read it from stdin)")
    judge.add_argument("--question-file", help="read the question from this file")
    judge.add_argument("--answer", "-a", help="the answer (or '-' to read it from stdin)")
    judge.add_argument("--answer-file", help="read the answer from this file")
    judge.add_argument("--reference", "-r", help="a reference answer (correctness and grounded judges)")
    judge.add_argument("--reference-file", help="read the reference answer from this file")
    judge.add_argument(
        "--context-file",
        help="earlier turns of the conversation, one a line: 'customer: …' / 'bot: …', or JSON lines "
        '{"speaker": "customer"|"bot", "text": "…"}; the last RELMON_CONTEXT_TURNS are judged with the question',
    )
    judge.add_argument(
        "--judge",
        "-j",
        default=RELEVANCY,
        metavar="NAME",
        help=f"which judge: {', '.join(JUDGE_NAMES)} or one of RELMON_JUDGES_DIR's (default relevancy)",
    )
    judge.add_argument("--json", action="store_true", help="print the verdict as JSON")

    evaluate = commands.add_parser("eval", help="measure a judge against human labels (JSONL)")
    evaluate.add_argument("labels", nargs="?", help="JSONL file: question, answer, optional reference, human score")
    evaluate.add_argument(
        "--from-feedback", action="store_true", help="use the votes on alerts as the labels (instead of a file)"
    )
    evaluate.add_argument(
        "--labels-from",
        choices=["outcomes"],
        help="outcomes: what the conversations did next (resolved or failed) as the labels, from stored pairs",
    )
    evaluate.add_argument(
        "--judge", "-j", default=RELEVANCY, metavar="NAME", help="a seed judge or one of RELMON_JUDGES_DIR's"
    )
    evaluate.add_argument("--threads", type=whole_number, default=8, help="judgments in flight at once (default 8)")
    evaluate.add_argument("--worst", type=whole_number, default=5, help="how many disagreements to list (default 5)")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")

    digest = commands.add_parser("digest", help="send this week's digest now")
    digest.add_argument("--dry-run", action="store_true", help="print it here; touch neither Slack nor the database")
    digest.add_argument("--force", action="store_true", help="send another even if this week's was sent")

    topics = commands.add_parser("topics", help="what to fix first: the period's questions grouped into topics")
    topics.add_argument("action", nargs="?", choices=["fixed"], help="fixed KEY: mark the topic KEY fixed, follow it")
    topics.add_argument("key", nargs="?", help="the topic's key (`relmon topics --json`; a unique prefix will do)")
    topics.add_argument("--at", help="when the fix shipped: YYYY-MM-DD[THH:MM] (RELMON_TIMEZONE; default: now)")
    topics.add_argument("--candidates", help="re-run the topic's test-set items on these answers (relmon regress)")
    topics.add_argument("--since", default="7d", help="how far back: 7d (default) or a date YYYY-MM-DD")
    topics.add_argument("--channel", help="only this channel ID")
    topics.add_argument("--json", action="store_true", help="every topic with its figures and its questions' ids")
    topics.add_argument(
        "--refresh",
        action="store_true",
        help="store the last 7 days' topics as the daily run (App Home, dry run)",
    )
    gaps = commands.add_parser("gaps", help="knowledge gaps: questions a teammate answered after the bot failed")
    gaps.add_argument("--since", default="7d", help="how far back: 7d (default) or a date YYYY-MM-DD")
    gaps.add_argument("--channel", help="only this channel ID")
    gaps.add_argument("--format", choices=["json", "markdown"], default="markdown", help="markdown: draft KB entries")
    gaps.add_argument("--include-private", action="store_true", help=_INCLUDE_PRIVATE)

    canary = commands.add_parser("canary", help="re-judge the labelled canary set now and store the run")
    canary.add_argument("--no-post", action="store_true", help="do not post 'the judge moved' in the alert channel")

    export = commands.add_parser("export", help="write stored judgments with their pairs")
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument("--since", help="only judgments on or after this date (YYYY-MM-DD)")
    export.add_argument("--output", "-o", help="write to this file instead of stdout")

    rejudge = commands.add_parser("rejudge", help="judge error verdicts again (the workers judge them, oldest first)")
    rejudge.add_argument("--errors", action="store_true", help="the error verdicts (required)")
    rejudge.add_argument("--since", help="only those stored since: 7d or a date YYYY-MM-DD (default: all)")
    rejudge.add_argument("--json", action="store_true", help="print what was reopened as JSON")

    backfill = commands.add_parser("backfill", help="judge the watched channels' past from Slack's history")
    backfill.add_argument("--since", default="30d", help="how far back: 30d (default) or a date YYYY-MM-DD")
    backfill.add_argument("--channel", action="append", help="only this channel ID (repeatable)")
    _history_options(backfill)
    imported = commands.add_parser(
        "import", help="judge a history: a workspace export zip, or a JSONL file of exchanges (docs/ingest.md)"
    )
    imported.add_argument("export", help="the Slack workspace export (zip) or exchanges (.jsonl)")
    _history_options(imported)

    _golden_arguments(commands)
    _regress_arguments(commands)

    ping = commands.add_parser("ping", help="health check: this host's worker or beat answers over the broker")
    ping.add_argument("which", choices=["worker", "beat"])
    ping.add_argument("--hostname", help="the node's host name (default: this host's, as in a container)")

    commands.add_parser("migrate", help="bring the database schema up to date, then exit")
    judges = commands.add_parser("judges", help="a team's own judges (RELMON_JUDGES_DIR): check the files")
    judges_actions = judges.add_subparsers(dest="judges_command", required=True, metavar="ACTION")
    check = judges_actions.add_parser("check", help="check every judge file and show one filled-in prompt")
    check.add_argument("--dir", help="the judges' directory (default RELMON_JUDGES_DIR)")
    commands.add_parser("doctor", help="check settings, Slack, Redis, the database and the LLM endpoint")
    commands.add_parser("manifest", help="print the Slack app manifest (YAML)")
    return parser


def _golden_arguments(commands) -> None:
    """The `golden` subcommand's own subcommands (`relmon.golden_cli` runs them)."""
    from golden.formats import FORMATS

    golden = commands.add_parser("golden", help="the golden set: export, import, list, remove")
    actions = golden.add_subparsers(dest="golden_command", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write the set in an evaluation tool's import format")
    export.add_argument("--format", choices=FORMATS, default="jsonl")
    export.add_argument("--output", "-o", help="write to this file instead of stdout")
    export.add_argument("--channel", action="append", help="also this private channel's items (repeatable)")
    export.add_argument("--include-private", action="store_true", help="every private channel's items too")
    export.add_argument("--for-user", metavar="USER_ID", help="also the private channels this person is a member of")
    export.add_argument("--redact", action="store_true", help="redact PII even if RELMON_REDACT_PII is off")
    imported = actions.add_parser("import", help="add a set from DeepEval, Langfuse, LangSmith, Braintrust, ...")
    imported.add_argument("file")
    listed = actions.add_parser("list", help="print the set")
    listed.add_argument("--include-private", action="store_true", help=_INCLUDE_PRIVATE)
    remove = actions.add_parser("remove", help="take an item out of the set")
    remove.add_argument("item_id", type=whole_number)


def _regress_arguments(commands) -> None:
    """`relmon regress` (`relmon.regress.command` runs it)."""
    regress = commands.add_parser("regress", help="judge a new bot version's answers to the golden questions")
    regress.add_argument("candidates", help="JSONL or CSV: id or question, answer (relmon golden export is a template)")
    regress.add_argument("--baseline", help="compare with: a run id, an earlier --json file, or none (default: the "
                         "last finished run)")  # fmt: skip
    regress.add_argument("--min-pass", type=float, default=0.8, help="exit 1 below this pass rate (default 0.8)")
    regress.add_argument("--json", help="write the report as JSON to this file")
    regress.add_argument("--junit", help="write JUnit XML to this file (one testcase per golden item)")
    regress.add_argument("--batch", action="store_true", help="judge through the OpenAI Batch API (half price)")
    regress.add_argument("--threads", type=whole_number, default=8, help="judgments in flight at once (default 8)")
    regress.add_argument("--fresh", action="store_true", help="judge again answers an earlier run judged already")
    regress.add_argument("--include-private", action="store_true", help=_INCLUDE_PRIVATE)
    regress.add_argument("--judge", action="append", metavar="NAME", help="also check each answer with this team "
                         "judge (RELMON_JUDGES_DIR; repeat for more): it fails an item at its fails_at")  # fmt: skip
    regress.add_argument("--allow-missing", action="store_true", help="pass without the golden items the file has "
                         "no answer for (they are listed, not run; without it they fail the run)")  # fmt: skip


def _history_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=whole_number, help="judge at most this many pairs in this run")
    parser.add_argument("--batch", action="store_true", help="judge through the OpenAI Batch API (half price)")
    parser.add_argument("--dry-run", action="store_true", help="read and pair, judge nothing, print the cost")
    parser.add_argument("--post", action="store_true", help="post the report to the digest channel")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from sqlalchemy.exc import SQLAlchemyError

    from common.embedded_redis import EmbeddedRedisError
    from common.startup import StartupError, database_problem

    try:
        return _dispatch(args)
    except ValidationError as error:  # a setting with a bad value: say which and why, not a traceback
        print(invalid_settings_message(error), file=sys.stderr)
        return 2
    except EmbeddedRedisError as error:  # bot, worker or beat without REDIS_URL: a setup problem, not a crash
        print(f"relmon {args.command}: cannot start the embedded Redis: {error}", file=sys.stderr)
        return 3
    except StartupError as error:  # the database unreachable at start-up, say: the same kind of problem
        print(f"relmon {args.command}: {error}", file=sys.stderr)
        return 3
    except SQLAlchemyError as error:  # export or digest with the database down: the same, not a traceback
        url = Settings().resolved_database_url
        print(f"relmon {args.command}: {database_problem('the database failed', url, error)}", file=sys.stderr)
        return 3


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "manifest":
        from bot.manifest import manifest_yaml

        sys.stdout.write(manifest_yaml())
        return 0
    settings = Settings()
    if args.command in ("judge", "eval"):
        from relmon import judge_cli

        return judge_cli.run_judge(args, settings) if args.command == "judge" else judge_cli.run_eval(args, settings)
    if args.command == "judges":
        from relmon.judges_cli import run_judges_check

        return run_judges_check(args, settings)
    if args.command == "worker":
        from workers.main import run_worker

        return run_worker(settings)
    if args.command == "beat":
        from workers.main import run_beat

        return run_beat(settings)
    if args.command == "ping":
        from workers.main import ping

        return ping(settings, args.which, args.hostname)
    if args.command == "export":
        from relmon.export import run_export

        return run_export(args, settings)
    if args.command in ("backfill", "import"):
        from relmon.backfill.command import run_backfill, run_import

        if args.command == "backfill":
            return run_backfill(args, settings)
        from relmon.backfill.exchanges_import import is_exchanges_file, run_import_exchanges

        if is_exchanges_file(args.export):  # a bot's past exchanges (JSONL), not a workspace export
            return run_import_exchanges(args, settings)
        return run_import(args, settings)
    if args.command == "rejudge":
        from relmon.rejudge_cli import run_rejudge

        return run_rejudge(args, settings)
    if args.command == "golden":
        from relmon.golden_cli import run_golden

        return run_golden(args, settings)
    if args.command in ("topics", "gaps"):
        from relmon.topics_cli import run_gaps, run_topics

        if args.command == "topics" and (args.action or args.key or args.at or args.candidates):
            from relmon.fixes_cli import run_fixed

            return run_fixed(args, settings)
        return run_topics(args, settings) if args.command == "topics" else run_gaps(args, settings)
    if args.command == "regress":
        from relmon.regress.command import run_regress

        return run_regress(args, settings)
    if args.command == "canary":
        from relmon.canary_cli import run_canary_command

        return run_canary_command(args, settings)
    if args.command == "digest":
        from relmon.digest_cli import run_digest

        return run_digest(args, settings)
    if args.command == "bot":
        from bot.server import serve

        return serve(settings, host=args.host, port=args.port)
    if args.command == "doctor":
        from relmon.doctor.report import run_doctor

        return run_doctor(settings)
    if args.command == "migrate":
        from relmon.runner import run_migrate

        return run_migrate(settings)
    if args.command == "run":
        from relmon.runner import run_all

        return run_all(settings, port=args.port)
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
