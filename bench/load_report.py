"""What bench.load prints: one run's report, and the default-settle and settle-0 runs side by side."""

from __future__ import annotations

from typing import Any

REPORTED = ("answers_sent", "captured", "judged", "queued_at_end", "lost", "duplicated")


def command_counts(client) -> dict[str, int]:
    """Calls per Redis command since the server started (INFO commandstats)."""
    return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in client.info("commandstats").items()}


def print_report(report: dict[str, Any]) -> None:
    print()
    print(
        f"load: {report['rate_per_s']:g} answers/s for {report['seconds']:g} s, {report['workers']} workers x "
        f"{report['concurrency']} threads, {report['database']}, answers {report['answers']}, "
        f"RELMON_SETTLE_SECONDS={report['settle_seconds']:g}"
    )
    for key in (*REPORTED, "alerts_expected", "alerts_posted"):
        print(f"  {key.replace('_', ' '):<34} {report[key]}")
    print(
        f"  {'LLM calls (beyond one per judgment)':<34} {report['llm_calls']} ({report['llm_calls_beyond_judgments']})"
    )
    print(
        f"  {'alert latency - LLM - settle p50 / p99':<34} {report['alert_latency_minus_llm_p50_s']:.3f} s / "
        f"{report['alert_latency_minus_llm_p99_s']:.3f} s"
    )
    print(f"  {'event ack p50 / p99':<34} {report['ack_p50_ms']} ms / {report['ack_p99_ms']} ms")
    if report["send_failures"]:
        print(f"  {'refused or failed deliveries':<34} {report['send_failures']}")
    print("  peak RSS:")
    for name, value in report["peak_rss_mb"].items():
        print(f"    {name:<32} {value:.1f} MB")
    busy = report["machine_busy_percent"]
    print(f"  CPU per answer, from the first send to the drained pipeline (machine {busy}% busy):")
    for name, value in report["cpu_ms_per_answer"].items():
        print(f"    {name:<32} {value:.2f} ms")
    print(f"    {'all of the above':<32} {sum(report['cpu_ms_per_answer'].values()):.2f} ms")
    relmon = report["relmon_cpu_ms_per_answer"]
    print(f"  relmon's processes together (bot + workers + beat): {relmon:.2f} ms CPU per answer (reported, no target)")
    before, after = report["reference_loop_ms"]
    print(f"  host speed: a fixed Python loop took {before} ms of CPU before the load and {after} ms after;")
    print(f"    a Redis round trip (PING) {report['redis_ping_cpu_us']} us of client CPU")
    top = ", ".join(f"{name} {n:g}" for name, n in report["redis_commands_top"].items())
    print(f"  Redis commands per answer (all processes): {report['redis_commands_per_answer']:g} ({top})")


def print_side_by_side(reports: list[dict[str, Any]]) -> None:
    """The runs' headline figures, one line each: the default settle time first, then settle 0 (a setting users
    do not run, printed for comparison with earlier figures)."""
    print()
    for report in reports:
        print(
            f"settle {report['settle_seconds']:g} s: relmon {report['relmon_cpu_ms_per_answer']:.2f} ms CPU per "
            f"answer, lost {report['lost']}, duplicated {report['duplicated']}, alert latency - LLM - settle p99 "
            f"{report['alert_latency_minus_llm_p99_s']:.3f} s, ack p99 {report['ack_p99_ms']} ms"
        )
