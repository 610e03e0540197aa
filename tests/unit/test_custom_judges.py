"""A team's own judges (judges/custom.py, judges/judge_files.py): reading a judge file, the problems `relmon judges
check` reports with their line numbers, the scale, filling the placeholders, and reading the reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.client import LLMReply
from judges.context import DOCUMENTS_HEADING, with_context
from judges.custom import CustomJudge, Scale
from judges.judge_files import JudgeFileError, catalog_of, load_catalog, parse_judge_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
LIMIT = 100_000

GOOD = '''name = "refund_policy"
scale = "pass/fail"
prompt = """
Does the answer promise a refund?
{question}
{answer}
"""
'''


def problems(text: str, limit: int = LIMIT) -> list[str]:
    with pytest.raises(JudgeFileError) as caught:
        parse_judge_file(text, "j.toml", max_prompt_chars=limit)
    return [str(problem) for problem in caught.value.problems]


def reply(text: str) -> LLMReply:
    return LLMReply(text=text, model="m", prompt_tokens=10, completion_tokens=5, latency_ms=1.0)


def test_a_good_file_reads_as_a_judge() -> None:
    spec = parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT)
    assert (spec.name, str(spec.scale), spec.fails_at, spec.needs) == (
        "refund_policy",
        "pass/fail",
        0,
        ("question", "answer"),
    )
    judge = CustomJudge(spec)
    assert (judge.min_score, judge.max_score, judge.inputs) == (0, 1, {"question": "question", "answer": "answer"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1..5", Scale(1, 5)),
        (" 0 .. 10 ", Scale(0, 10)),
        ("pass/fail", Scale(0, 1, pass_fail=True)),
        ("PASS/FAIL", Scale(0, 1, pass_fail=True)),
    ],
)
def test_scales_read(text: str, expected: Scale) -> None:
    assert Scale.parse(text) == expected


@pytest.mark.parametrize("text", ["5..1", "3..3", "1-5", "good/bad", "1..500", ""])
def test_bad_scales_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="scale"):
        Scale.parse(text)


def test_bad_toml_names_its_line_and_column() -> None:
    (problem,) = problems('name = "x"\nscale = "1..5\nfails_at = 2\n')
    assert problem.startswith("j.toml:2:") and "not valid TOML" in problem


def test_an_unknown_placeholder_names_the_line_it_is_on() -> None:
    text = 'name = "x"\nscale = "1..5"\nfails_at = 2\nprompt = """\nJudge this.\n{answer}\nand {quesiton}\n"""\n'
    (problem,) = problems(text)
    assert problem.startswith("j.toml:7: unknown placeholder {quesiton}")


def test_a_missing_scale_and_a_seed_name_are_both_said() -> None:
    found = problems('name = "relevancy"\nprompt = "{answer}"\n')
    assert found == [
        "j.toml:1: name 'relevancy' is a seed judge's: choose another name",
        'j.toml:1: missing scale: add scale = "pass/fail" or an integer range such as scale = "1..5"',
    ]


def test_a_range_needs_the_score_that_fails_on_the_scale() -> None:
    assert any("missing fails_at" in p for p in problems('name = "x"\nscale = "1..5"\nprompt = "{answer}"\n'))
    (off,) = problems('name = "x"\nscale = "1..5"\nfails_at = 5\nprompt = "{answer}"\n')
    assert off.startswith("j.toml:3: fails_at 5 is not on the scale 1..5")


def test_a_prompt_over_the_size_limit_is_refused() -> None:
    long = 'name = "x"\nscale = "pass/fail"\nprompt = """\n' + "Be strict. " * 300 + '{answer}\n"""\n'
    (problem,) = problems(long, limit=3_000)
    assert problem.startswith("j.toml:3: the prompt is too long") and "RELMON_MAX_PROMPT_CHARS" in problem
    parse_judge_file(long, "j.toml", max_prompt_chars=LIMIT)  # fits the default limit


def test_unknown_fields_and_needs_outside_the_prompt_are_said() -> None:
    text = 'name = "x"\nscale = "pass/fail"\nneeds = ["documents"]\ncolour = "red"\nprompt = "{answer}"\n'
    assert problems(text) == [
        "j.toml:4: unknown field 'colour': the fields are name, description, scale, fails_at, needs, prompt, labels",
        "j.toml:3: needs 'documents', but the prompt has no {documents}",
    ]


def test_the_placeholders_are_filled_between_the_seed_delimiters() -> None:
    text = (
        'name = "x"\nscale = "1..3"\nfails_at = 1\n'
        'prompt = "Turns: {context}\\nQ: {question}\\nA: {answer}\\nDocs: {documents}\\nLiteral {{braces}}"\n'
    )
    judge = CustomJudge(parse_judge_file(text, "j.toml", max_prompt_chars=LIMIT))
    question = with_context("And on Android?", "[customer] How do I reset?\n[bot] Settings.")
    documents = f"{DOCUMENTS_HEADING}\n\n[1] reset.md\nHold the button."
    prompt = judge.render(question, "Hold it for {answer} seconds.", documents, LIMIT)
    tag = prompt.split("<<<BEGIN context ", 1)[1][:16]
    assert f"<<<BEGIN context {tag}>>>\n[customer] How do I reset?\n[bot] Settings.\n<<<END context {tag}>>>" in prompt
    assert f"<<<BEGIN question {tag}>>>\nAnd on Android?\n<<<END question {tag}>>>" in prompt
    assert f"<<<BEGIN documents {tag}>>>\n[1] reset.md\nHold the button.\n<<<END documents {tag}>>>" in prompt
    assert "Hold it for {answer} seconds." in prompt  # a text holding a placeholder is copied, never filled
    assert "Literal {braces}" in prompt and "an integer from 1 (worst) to 3 (best)" in prompt


def test_a_long_answer_is_cut_to_the_size_limit() -> None:
    judge = CustomJudge(parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT))
    prompt = judge.render("Refund?", "x" * 50_000, None, 8_000)
    assert len(prompt) + len(judge.system) <= 8_000 and "characters …]" in prompt


def test_a_pair_without_what_the_judge_needs_is_not_judged_and_says_so() -> None:
    text = 'name = "grounding"\nscale = "pass/fail"\nprompt = "{documents}\\n{answer}"\n'
    judge = CustomJudge(parse_judge_file(text, "j.toml", max_prompt_chars=LIMIT))
    assert judge.needs_reference
    verdict = judge.evaluate(None, "Q?", "A.", "a reference answer, not documents")  # type: ignore[arg-type]
    assert verdict.status == "empty" and verdict.error == "not judged by grounding: the pair has no {documents}"


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('{"score": 0, "reasoning": "Promises a refund."}', 0),
        ('Here: ```json\n{"score": "pass", "reasoning": "Fine."}\n```', 1),
        ('{"score": "FAIL", "reasoning": "No."}', 0),
        ('{"score": true, "reasoning": "Fine."}', 1),
    ],
)
def test_pass_fail_replies_are_read_tolerantly(text: str, score: int) -> None:
    judge = CustomJudge(parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT))
    verdict = judge.verdict_of(reply(text))
    assert (verdict.status, verdict.score, verdict.judge) == ("ok", score, "refund_policy")


@pytest.mark.parametrize("text", ['{"score": 2, "reasoning": "x"}', '{"score": "maybe", "reasoning": "x"}', "Pass."])
def test_a_reply_off_the_scale_is_an_error_verdict(text: str) -> None:
    judge = CustomJudge(parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT))
    verdict = judge.verdict_of(reply(text))
    assert verdict.status == "error" and verdict.score is None and "cannot read the judge's reply" in verdict.error


def test_editing_the_prompt_makes_a_new_prompt_version_and_cache_key() -> None:
    before = CustomJudge(parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT))
    after = CustomJudge(parse_judge_file(GOOD.replace("promise", "offer"), "j.toml", max_prompt_chars=LIMIT))
    same = CustomJudge(parse_judge_file(GOOD, "other.toml", max_prompt_chars=LIMIT))
    assert before.prompt_version != after.prompt_version and before.prompt_version == same.prompt_version
    assert before.cache_key("m", "q", "a", None) != after.cache_key("m", "q", "a", None)
    assert before._verdict(status="empty").prompt_version == before.prompt_version


def test_broken_files_are_left_out_and_the_rest_load() -> None:
    catalog = catalog_of(
        [("a.toml", GOOD), ("b.toml", "name = ["), ("c.toml", GOOD)], max_prompt_chars=LIMIT, directory="d"
    )
    assert list(catalog.custom) == ["refund_policy"]
    assert [str(p).split(":")[0] for p in catalog.problems] == ["b.toml", "c.toml"]
    assert "also in a.toml" in str(catalog.problems[1])
    assert catalog.get("relevancy").name == "relevancy" and catalog.get("refund_policy").threshold == 0
    with pytest.raises(ValueError, match="unknown judge 'nope'"):
        catalog.get("nope")
    assert catalog.thresholds() == {"refund_policy": 0.0}


def test_the_examples_load() -> None:
    catalog = load_catalog(EXAMPLES, max_prompt_chars=LIMIT)
    assert catalog.problems == ()
    assert sorted(catalog.custom) == ["customer_language", "refund_policy", "status_page"]


def test_names_and_thresholds_load_without_the_llm_client() -> None:
    """The bot and the channel rules read a team's judges' names and thresholds without loading the OpenAI SDK."""
    import subprocess
    import sys

    probe = (
        "import sys; from pathlib import Path; from judges.judge_files import load_catalog; "
        f"c = load_catalog(Path({str(EXAMPLES)!r}), max_prompt_chars=100000); "
        "print(sorted(c.thresholds().items()), 'openai' in sys.modules)"
    )
    root = str(EXAMPLES.parents[1])
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root, env={"PYTHONPATH": root}
    ).stdout.strip()
    assert shown == "[('customer_language', 1.0), ('refund_policy', 0.0), ('status_page', 0.0)] False"


def test_a_labelled_file_is_named_beside_the_judge_file() -> None:
    spec = parse_judge_file('labels = "refund.jsonl"\n' + GOOD, "/teams/judges.d/j.toml", max_prompt_chars=LIMIT)
    assert spec.labels_path == Path("/teams/judges.d/refund.jsonl")
    assert parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT).labels_path is None
    assert problems("labels = 3\n" + GOOD) == [
        'j.toml:1: labels: the labelled file\'s name, such as labels = "refund_policy.jsonl"'
    ]
    catalog = load_catalog(EXAMPLES, max_prompt_chars=LIMIT)
    assert all(spec.labels_path.is_file() for spec in catalog.specs.values())  # each example has its labels


def test_judges_check_names_a_labelled_file_it_cannot_read(tmp_path: Path) -> None:
    from relmon.judges_cli import check_report

    (tmp_path / "j.toml").write_text('name = "refunds"\nlabels = "gone.jsonl"\n' + GOOD.split("\n", 1)[1])
    lines, good = check_report(load_catalog(tmp_path, max_prompt_chars=LIMIT), LIMIT)
    assert not good
    assert any(
        line.startswith(f"{tmp_path / 'j.toml'}:2: labels: cannot read {tmp_path / 'gone.jsonl'}") for line in lines
    )


GOOD_YAML = """# the refund rule, in YAML
name: refund_policy
description: The bot never promises a refund.
scale: pass/fail
needs: [question, answer]
prompt: |
  Does the answer promise a refund?
  {question}
  {answer}
"""


def yaml_problems(text: str, path: str = "j.yaml") -> list[str]:
    with pytest.raises(JudgeFileError) as caught:
        parse_judge_file(text, path, max_prompt_chars=LIMIT)
    return [str(problem) for problem in caught.value.problems]


def test_a_yaml_file_reads_as_the_same_judge_as_its_toml() -> None:
    from_yaml = parse_judge_file(GOOD_YAML, "j.yaml", max_prompt_chars=LIMIT)
    from_toml = parse_judge_file(GOOD, "j.toml", max_prompt_chars=LIMIT)
    assert (from_yaml.name, from_yaml.scale, from_yaml.fails_at, from_yaml.needs) == (
        from_toml.name, from_toml.scale, from_toml.fails_at, from_toml.needs,
    )  # fmt: skip
    assert CustomJudge(from_yaml).prompt_version == CustomJudge(from_toml).prompt_version  # the same prompt text
    assert parse_judge_file(GOOD_YAML, "j.yml", max_prompt_chars=LIMIT).name == "refund_policy"


def test_yaml_problems_name_their_lines() -> None:
    assert yaml_problems(GOOD_YAML.replace("{question}", "{customer}")) == [
        "j.yaml:8: unknown placeholder {customer}: use {question}, {answer}, {reference}, {context}, {documents} "
        "(write {{ and }} for a literal brace)",
        "j.yaml:5: needs 'question', but the prompt has no {question}",
    ]
    broken = GOOD_YAML.replace("scale: pass/fail", "scale: 5..1").replace("needs: [question, answer]", "colour: red")
    assert yaml_problems(broken) == [
        "j.yaml:5: unknown field 'colour': the fields are name, description, scale, fails_at, needs, prompt, labels",
        "j.yaml:4: scale '5..1': the lowest score must be below the highest",
    ]
    assert yaml_problems(GOOD_YAML.replace("scale: pass/fail\n", "")) == [
        'j.yaml:1: missing scale: add scale = "pass/fail" or an integer range such as scale = "1..5"'
    ]
    [syntax] = yaml_problems("name: x\nprompt: [unclosed\n")
    assert syntax.startswith("j.yaml:3:1: not valid YAML:")
    assert yaml_problems("- just\n- a list\n") == [
        "j.yaml:1: not a judge: write its fields as name: …, scale: …, prompt: |"
    ]


def test_a_directory_holds_toml_and_yaml_judges_and_one_name_twice_is_said(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(GOOD.replace("refund_policy", "refunds"))
    (tmp_path / "b.yaml").write_text(GOOD_YAML.replace("refund_policy", "tone"))
    (tmp_path / "c.yml").write_text(GOOD_YAML.replace("refund_policy", "refunds"))
    (tmp_path / "notes.txt").write_text("not a judge")
    catalog = load_catalog(tmp_path, max_prompt_chars=LIMIT)
    assert sorted(catalog.specs) == ["refunds", "tone"]
    assert [str(problem) for problem in catalog.problems] == [
        f"{tmp_path / 'c.yml'}:2: judge 'refunds' is also in {tmp_path / 'a.toml'}: rename one"
    ]
