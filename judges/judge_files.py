"""Judge files: a team's judges, one TOML or YAML file each in a directory (`judges.d/NAME.toml`, `NAME.yaml` or
`NAME.yml`: the same fields), read and checked.

    name = "refund_policy"
    description = "The bot never promises a refund."
    scale = "pass/fail"          # or an integer range: "1..5"
    fails_at = 0                 # a score at or below this fails (pass/fail: 0, the default)
    needs = ["question", "answer"]   # optional: a pair without these is not judged by it
                                     # (default: the placeholders the prompt uses, but {context})
    labels = "refund_policy.jsonl"   # optional: answers labelled by people (relmon eval's format), beside the
                                     # file: the weekly canary re-judges them and reports the judge's agreement
    prompt = '''
    Does the answer below promise the customer a refund? ...
    {question}
    {answer}
    '''

In YAML the same judge reads `name: refund_policy`, `scale: pass/fail`, `needs: [question, answer]`, and the prompt
as a block (`prompt: |` then the text indented).

Every problem is reported with the file's line (and column, for TOML and YAML syntax): a broken file is left out,
never a reason for relmon not to start. Plain functions over text and paths; nothing is kept between calls."""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from judges.judge_spec import PLACEHOLDERS, JudgeSpec, Scale
from judges.names import JUDGE_NAMES
from judges.prompts import SYSTEM_MESSAGE, PromptTemplate

FIELDS = ("name", "description", "scale", "fails_at", "needs", "prompt", "labels")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")  # a judgment's judge column holds 32 characters
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
if TYPE_CHECKING:
    from judges.base import Judge
    from judges.custom import CustomJudge

MIN_FIELD_CHARS = 200  # as PromptTemplate.render_within: each text keeps at least this much room


@dataclass(frozen=True)
class FileProblem:
    """One thing wrong with a judge file, where it is."""

    path: str
    line: int | None
    message: str
    column: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


class JudgeFileError(ValueError):
    def __init__(self, problems: list[FileProblem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


def _key_line(text: str, key: str) -> int | None:
    """The line a top-level key is set on (1-based), for a problem with its value."""
    match = re.search(rf"(?m)^\s*{re.escape(key)}\s*=", text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _prompt_start(text: str) -> int | None:
    """The line the prompt's text starts on: a multi-line string starts on the line after its opening quotes."""
    match = re.search(r"(?m)^\s*prompt\s*=\s*(\"\"\"|''')?[ \t]*(\n)?", text)
    if match is None:
        return None
    line = text.count("\n", 0, match.start()) + 1
    return line + 1 if match.group(1) and match.group(2) else line


YAML_SUFFIXES = (".yaml", ".yml")


def is_yaml(path: str) -> bool:
    return path.lower().endswith(YAML_SUFFIXES)


@dataclass(frozen=True)
class Parsed:
    """A judge file's fields, with the line each key is set on and the line its prompt's text starts on."""

    data: dict
    key_lines: dict[str, int]
    prompt_start: int | None


def _parse_toml(text: str, path: str) -> Parsed:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python 3.14 gives lineno/colno; earlier ones say "(at line L, column C)" in the message.
        line, column = getattr(error, "lineno", None), getattr(error, "colno", None)
        message = str(getattr(error, "msg", None) or error)
        found = re.search(r"\(at line (\d+), column (\d+)\)", message)
        if found and line is None:
            line, column = int(found.group(1)), int(found.group(2))
            message = message[: found.start()].strip()
        raise JudgeFileError([FileProblem(path, line, f"not valid TOML: {message}", column)]) from None
    lines = {key: line for key in data if (line := _key_line(text, key)) is not None}
    return Parsed(data, lines, _prompt_start(text))


def _parse_yaml(text: str, path: str) -> Parsed:
    """YAML's node tree gives each key's line (its marks); the values are read as safe_load reads them."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise JudgeFileError([FileProblem(path, line, f"not valid YAML: {problem}", column)]) from None
    if data is None:
        data, node = {}, None
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode | None):
        raise JudgeFileError([FileProblem(path, 1, "not a judge: write its fields as name: …, scale: …, prompt: |")])
    lines: dict[str, int] = {}
    prompt_start = None
    for key_node, value_node in node.value if node is not None else ():
        key = str(key_node.value)
        lines.setdefault(key, key_node.start_mark.line + 1)
        if key == "prompt" and isinstance(value_node, yaml.ScalarNode):
            # A block (`|` or `>`) starts on the line after its indicator; a quoted or plain one on its own.
            block = value_node.style in ("|", ">")
            prompt_start = value_node.start_mark.line + (2 if block else 1)
    return Parsed({str(key): value for key, value in data.items()}, lines, prompt_start)


def parse_judge_file(text: str, path: str, *, max_prompt_chars: int) -> JudgeSpec:
    """The judge a file's text describes (YAML by its suffix, else TOML); JudgeFileError with every problem found
    (line-numbered) otherwise."""
    parsed = (_parse_yaml if is_yaml(path) else _parse_toml)(text, path)
    data = parsed.data
    problems: list[FileProblem] = []

    def problem(key: str | None, message: str, line: int | None = None) -> None:
        problems.append(FileProblem(path, line if line is not None else (parsed.key_lines.get(key) if key else None),
                                    message))  # fmt: skip

    for key in data:
        if key not in FIELDS:
            problem(key, f"unknown field {key!r}: the fields are {', '.join(FIELDS)}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problem("name", "name: give a name of lower-case letters, digits and _ (up to 32), starting with a letter")
    elif name in JUDGE_NAMES:
        problem("name", f"name {name!r} is a seed judge's: choose another name")
    scale = None
    raw_scale = data.get("scale")
    if raw_scale is None:
        problem(None, 'missing scale: add scale = "pass/fail" or an integer range such as scale = "1..5"', 1)
    elif not isinstance(raw_scale, str):
        problem("scale", 'scale: write it as a string, "pass/fail" or "1..5"')
    else:
        try:
            scale = Scale.parse(raw_scale)
        except ValueError as error:
            problem("scale", str(error))
    fails_at = data.get("fails_at", 0 if scale is not None and scale.pass_fail else None)
    if scale is not None:
        if fails_at is None:
            problem(None, f"missing fails_at: the score at or below which an answer fails, on {scale}", 1)
        elif isinstance(fails_at, bool) or not isinstance(fails_at, int):
            problem("fails_at", "fails_at: a whole number")
        elif not scale.low <= fails_at < scale.high:
            problem("fails_at", f"fails_at {fails_at} is not on the scale {scale} (below its highest score)")
    prompt = data.get("prompt")
    used: list[str] = []
    if not isinstance(prompt, str) or not prompt.strip():
        problem(None, "missing prompt: what the judge is asked, with {question} and {answer} where they go", 1)
    else:
        used = _check_placeholders(prompt, parsed.prompt_start, path, problems)
        if not {"answer"} <= set(used):
            problem("prompt", "the prompt never shows the answer: put {answer} where it goes")
        elif scale is not None and not any(p.message.startswith("unknown placeholder") for p in problems):
            template = PromptTemplate(prompt.rstrip() + scale.reply_format(), "format")
            fixed = len(SYSTEM_MESSAGE) + template.fixed_length
            room = max_prompt_chars - fixed
            if room < MIN_FIELD_CHARS * len(template.placeholders):
                problem(
                    "prompt",
                    f"the prompt is too long: its own text takes {fixed:,} of the {max_prompt_chars:,} characters "
                    f"a request may hold (RELMON_MAX_PROMPT_CHARS), leaving too little for the texts: shorten it",
                )
    needs = data.get("needs")
    if needs is None:
        needs = [name for name in used if name != "context"]
    elif not isinstance(needs, list) or not all(isinstance(item, str) for item in needs):
        problem("needs", 'needs: a list of placeholders, such as needs = ["question", "answer"]')
        needs = []
    else:
        for item in needs:
            if item not in PLACEHOLDERS:
                problem("needs", f"needs: unknown placeholder {item!r}: choose from {', '.join(PLACEHOLDERS)}")
            elif item not in used:
                problem("needs", f"needs {item!r}, but the prompt has no {{{item}}}")
    description = data.get("description", "")
    if not isinstance(description, str):
        problem("description", "description: a string")
        description = ""
    labels = data.get("labels")
    if labels is not None and (not isinstance(labels, str) or not labels.strip()):
        problem("labels", 'labels: the labelled file\'s name, such as labels = "refund_policy.jsonl"')
        labels = None
    if problems:
        raise JudgeFileError(problems)
    assert isinstance(name, str) and isinstance(prompt, str) and scale is not None and isinstance(fails_at, int)
    return JudgeSpec(name, prompt, scale, fails_at, tuple(needs), description.strip(), path, labels)


def _check_placeholders(prompt: str, start: int | None, path: str, problems: list[FileProblem]) -> list[str]:
    """The placeholders the prompt uses, in order; an unknown one is a problem on its own line of the file (`start`:
    the line the prompt's text starts on)."""
    used: list[str] = []
    for match in _PLACEHOLDER.finditer(prompt):
        name = match.group(1)
        if name is None:
            continue
        if name in PLACEHOLDERS:
            if name not in used:
                used.append(name)
            continue
        line = start + prompt.count("\n", 0, match.start()) if start is not None else None
        problems.append(
            FileProblem(
                path,
                line,
                f"unknown placeholder {{{name}}}: use {', '.join('{' + p + '}' for p in PLACEHOLDERS)} "
                "(write {{ and }} for a literal brace)",
            )
        )
    return used


@dataclass(frozen=True)
class JudgeCatalog:
    """The team's judges that loaded, and the problems of those that did not (left out). Names and thresholds are
    read from the files' specs; a judge itself (with the LLM client's library) is built when first asked for, so
    the bot and the channel rules never load it."""

    specs: Mapping[str, JudgeSpec] = field(default_factory=dict)
    problems: tuple[FileProblem, ...] = ()
    directory: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return JUDGE_NAMES + tuple(self.specs)

    @functools.cached_property
    def custom(self) -> dict[str, CustomJudge]:
        from judges.custom import CustomJudge

        return {name: CustomJudge(spec) for name, spec in self.specs.items()}

    def get(self, name: str) -> Judge:
        """A seed judge or a team's, by name; ValueError naming the choices otherwise."""
        if name in self.specs:
            return self.custom[name]
        if name in JUDGE_NAMES:
            from judges import get_judge

            return get_judge(name)
        raise ValueError(f"unknown judge {name!r}: choose one of {', '.join(self.names)}")

    def thresholds(self) -> dict[str, float]:
        return {name: float(spec.fails_at) for name, spec in self.specs.items()}


JUDGE_FILE_SUFFIXES = (".toml", *YAML_SUFFIXES)


def judge_files(directory: Path) -> list[Path]:
    """The judge files of a directory (`*.toml`, `*.yaml`, `*.yml`), by name."""
    return sorted(path for path in directory.iterdir() if path.suffix.lower() in JUDGE_FILE_SUFFIXES and path.is_file())


def key_line(text: str, path: str, key: str) -> int | None:
    """The line `key` is set on in a judge file's text (either format); None when not found or not readable."""
    try:
        return (_parse_yaml if is_yaml(path) else _parse_toml)(text, path).key_lines.get(key)
    except JudgeFileError:
        return None


def load_catalog(directory: Path | None, *, max_prompt_chars: int) -> JudgeCatalog:
    """Every judge file of `directory` (none when None): those that parse, and the problems of the others. Two
    files naming the same judge: the first (by file name) is kept, the second is a problem."""
    if directory is None:
        return JudgeCatalog()
    if not directory.is_dir():
        problem = FileProblem(str(directory), None, "not a directory (RELMON_JUDGES_DIR): no custom judges loaded")
        return JudgeCatalog(problems=(problem,), directory=str(directory))
    return catalog_of(((str(path), _read(path)) for path in judge_files(directory)), max_prompt_chars, str(directory))


def _read(path: Path) -> str | FileProblem:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return FileProblem(str(path), None, f"cannot read it: {error}")


def catalog_of(
    files: Iterable[tuple[str, str | FileProblem]], max_prompt_chars: int, directory: str | None
) -> JudgeCatalog:
    specs: dict[str, JudgeSpec] = {}
    problems: list[FileProblem] = []
    for path, text in files:
        if isinstance(text, FileProblem):
            problems.append(text)
            continue
        try:
            spec = parse_judge_file(text, path, max_prompt_chars=max_prompt_chars)
        except JudgeFileError as error:
            problems.extend(error.problems)
            continue
        if spec.name in specs:
            first = specs[spec.name].source
            problems.append(
                FileProblem(path, key_line(text, path, "name"), f"judge {spec.name!r} is also in {first}: rename one")
            )
            continue
        specs[spec.name] = spec
    return JudgeCatalog(specs, tuple(problems), directory)
