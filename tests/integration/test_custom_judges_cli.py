"""A team's own judges through the `relmon` command itself (in process through `relmon.cli.main`, and one real
process), against the fake LLM over HTTP: `relmon judges check`, `relmon judge --judge NAME` and `relmon eval
LABELS.jsonl --judge NAME` on the three example judges and their labelled files (examples/judges.d)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import relmon_cli

server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli
EXAMPLES = relmon_cli.ROOT / "examples" / "judges.d"


def test_judges_check_passes_the_examples_and_shows_one_filled_prompt(cli) -> None:
    outcome = cli("judges", "check", base_url=None, RELMON_JUDGES_DIR=str(EXAMPLES))
    assert outcome.returncode == 0, outcome.stderr
    for name in ("customer_language", "refund_policy", "status_page"):
        assert f"{name}.toml: ok: judge {name}" in outcome.stdout
    assert "example: the prompt of customer_language filled with a sample pair" in outcome.stdout
    assert "<<<BEGIN question " in outcome.stdout and "Can I get my money back?" in outcome.stdout
    assert "3 of 3 judge file(s) ok" in outcome.stderr


def test_judges_check_lists_each_problem_with_its_line_and_fails(cli, tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text((EXAMPLES / "refund_policy.toml").read_text())
    (tmp_path / "typo.toml").write_text(
        'name = "typo"\nscale = "1..5"\nfails_at = 2\nprompt = """\n{answer}\n{quesiton}\n"""\n'
    )
    (tmp_path / "broken.toml").write_text('name = "broken\nscale = "pass/fail"\n')
    outcome = cli("judges", "check", "--dir", str(tmp_path), base_url=None)
    assert outcome.returncode == 1
    lines = outcome.stdout.splitlines()
    assert f"{tmp_path / 'typo.toml'}:6: unknown placeholder {{quesiton}}" in outcome.stdout
    assert any(line.startswith(f"{tmp_path / 'broken.toml'}:1:") and "not valid TOML" in line for line in lines)
    assert "good.toml: ok: judge refund_policy" in outcome.stdout
    assert "1 of 3 judge file(s) ok" in outcome.stderr and "Traceback" not in outcome.stderr


def test_yaml_judges_are_checked_and_judge_beside_toml_ones(cli, fake, tmp_path: Path) -> None:
    (tmp_path / "refund_policy.toml").write_text((EXAMPLES / "refund_policy.toml").read_text())
    (tmp_path / "tone.yaml").write_text(
        "name: tone\nscale: 1..5\nfails_at: 2\nprompt: |\n  Is this polite?\n  {answer}\n"
    )
    (tmp_path / "typo.yml").write_text("name: typo\nscale: pass/fail\nprompt: |\n  {answer}\n  {quesiton}\n")
    outcome = cli("judges", "check", "--dir", str(tmp_path), base_url=None)
    assert outcome.returncode == 1
    assert "tone.yaml: ok: judge tone" in outcome.stdout and "refund_policy.toml: ok" in outcome.stdout
    assert f"{tmp_path / 'typo.yml'}:5: unknown placeholder {{quesiton}}" in outcome.stdout
    assert "2 of 3 judge file(s) ok" in outcome.stderr
    (tmp_path / "typo.yml").unlink()
    env = {"RELMON_JUDGES_DIR": str(tmp_path)}
    judged = cli("judge", "-q", "Hi?", "-a", "Thank you for asking!", "-j", "tone", "--json", base_url=fake.base_url,
                 **env)  # fmt: skip
    assert judged.returncode == 0, judged.stderr
    verdict = json.loads(judged.stdout)
    assert verdict["judge"] == "tone" and verdict["max_score"] == 5 and verdict["status"] == "ok"


def test_judges_check_without_a_directory_says_what_to_set(cli) -> None:
    outcome = cli("judges", "check", base_url=None)
    assert outcome.returncode == 1 and "set RELMON_JUDGES_DIR" in outcome.stderr


@pytest.mark.parametrize(
    ("answer", "said", "score"),
    [
        ("Sorry! I'll refund the second charge right away.", "refund_policy: fail (FAILS: fails at 0 or lower)", 0),
        ("The billing team reviews double charges and will reply here.", "refund_policy: pass (passes", 1),
    ],
)
def test_judge_with_a_team_judge(cli, fake, answer: str, said: str, score: int) -> None:
    question = "I was charged twice, can I get my money back?"
    env = {"RELMON_JUDGES_DIR": str(EXAMPLES)}
    outcome = cli("judge", "-q", question, "-a", answer, "--judge", "refund_policy", base_url=fake.base_url, **env)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.startswith(said)
    as_json = cli("judge", "-q", question, "-a", answer, "-j", "refund_policy", "--json", base_url=fake.base_url, **env)
    verdict = json.loads(as_json.stdout)
    assert (verdict["judge"], verdict["score"], verdict["max_score"]) == ("refund_policy", score, 1)
    sent = fake.requests[0]
    assert "never promise, grant or confirm a refund" in sent["messages"][-1]["content"]
    assert sent["response_format"]["type"] == "json_schema"  # the scale's schema, as the seed judges send theirs


def test_an_unknown_or_broken_judge_is_a_usage_error(cli, fake, tmp_path: Path) -> None:
    (tmp_path / "tone.toml").write_text('name = "tone"\nprompt = "{answer}"\n')  # no scale
    env = {"RELMON_JUDGES_DIR": str(tmp_path)}
    broken = cli("judge", "-q", "Q?", "-a", "A.", "--judge", "tone", base_url=fake.base_url, **env)
    assert broken.returncode == 2 and "judge 'tone' is left out" in broken.stderr and "missing scale" in broken.stderr
    unknown = cli("eval", str(EXAMPLES / "refund_policy.jsonl"), "--judge", "nope", base_url=fake.base_url, **env)
    assert unknown.returncode == 2 and "unknown judge 'nope'" in unknown.stderr
    assert fake.requests == []


@pytest.mark.parametrize("name", ["refund_policy", "customer_language", "status_page"])
def test_eval_of_each_example_judge_against_its_labels(cli, fake, name: str) -> None:
    labels = EXAMPLES / f"{name}.jsonl"
    env = {"RELMON_JUDGES_DIR": str(EXAMPLES)}
    outcome = cli("eval", str(labels), "--judge", name, "--json", base_url=fake.base_url, **env)
    assert outcome.returncode == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert report["judge"] == name and report["items"] == 5 and report["n"] == 5 and report["errors"] == 0
    assert report["exact_agreement"] == 1.0  # the fake judges each rule as its prompt says
    assert len(fake.requests) == 5


def test_judge_in_a_real_process(fake, tmp_path: Path) -> None:
    outcome = relmon_cli.relmon(
        "judge",
        "-q",
        "¿Cómo cambio mi contraseña?",
        "-a",
        "Go to Settings, then Security, and click Change password.",
        "--judge",
        "customer_language",
        base_url=fake.base_url,
        cwd=tmp_path,
        RELMON_JUDGES_DIR=str(EXAMPLES),
    )
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.startswith("customer_language: 1 on 1..3 (FAILS: fails at 1 or lower)")


def test_a_broken_judge_is_said_at_start_up_and_by_the_doctor_and_left_out(tmp_path: Path, caplog) -> None:
    import logging

    from relmon.doctor.judges_check import check_judges
    from store.judge_catalog import announce_judges
    from store.rules import ChannelRules
    from tests.builders import make_settings

    (tmp_path / "good.toml").write_text((EXAMPLES / "status_page.toml").read_text())
    (tmp_path / "tone.toml").write_text('name = "tone"\nscale = "1..5"\nfails_at = 2\nprompt = "{answer} {tone}"\n')
    settings = make_settings(judges_dir=tmp_path, default_judges=["relevancy", "tone", "status_page"])
    with caplog.at_level(logging.INFO, logger="relmon.judges"):
        announce_judges(settings)
    logged = [record.getMessage() for record in caplog.records]
    assert logged[0] == "custom judge left out: tone.toml:4"
    assert caplog.records[0].problem.startswith("unknown placeholder {tone}")
    assert "custom judges loaded: status_page" in logged
    assert "RELMON_JUDGES names no judge 'tone': left out (run `relmon judges check`)" in logged

    lines = [check.line() for check in check_judges(settings)]
    assert lines[0].startswith(f"warn  custom judges: left out: {tmp_path / 'tone.toml'}:4: unknown placeholder")
    assert "RELMON_JUDGES names 'tone', which is no judge: left out" in lines[1]
    assert lines[2] == "ok    custom judges: 1 loaded: status_page"

    rule = ChannelRules().for_channel("C_SUPPORT", settings)
    assert rule.thresholds["status_page"] == 0 and "tone" not in rule.thresholds
    from store.judge_catalog import judge_catalog
    from workers.judging.rules import judges_in_force

    assert judges_in_force(None, rule.judges, False, judge_catalog(settings)) == ["relevancy", "status_page"]
