"""The fake LLM's default replies: realistic judge replies graded from the answer text (see
tests/fakes/openai_server.py for the rules), and a minimal value for any other JSON schema."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.openai_embeddings import topic_name

NO_DOCUMENT = "No document seems to precisely answer your question"


def _grade_text(text: str, low: int, middle: int, high: int, *, sampled: bool = False, disputes: bool = False) -> int:
    lowered = text.lower()
    if sampled and (disputes or "wobbly" in lowered):
        return high
    if "wobbly" in lowered:
        return low
    if "offtopic" in lowered:
        return low
    if "partial" in lowered:
        return middle
    return high


def _between(text: str, start: str, end: str | None) -> str | None:
    at = text.find(start)
    if at == -1:
        return None
    begin = at + len(start)
    stop = text.rfind(end) if end else -1
    return text[begin : stop if stop >= begin else len(text)].strip()


_OPENING = re.compile(r"<<<BEGIN \w+ ([0-9a-f]{16})>>>\n")


def delimited_field(prompt: str, name: str) -> str | None:
    """The text of field `name` in a delimited prompt, read as a judge is told to: the first opening line after
    the instructions gives the tag; the field runs from its own opening line to its own END line. None when the
    prompt has no delimiters (or not this field)."""
    first = _OPENING.search(prompt)
    if first is None:
        return None
    opening = f"<<<BEGIN {name} {first.group(1)}>>>\n"
    begin = prompt.find(opening)
    end = prompt.find(f"\n<<<END {name} {first.group(1)}>>>", begin) if begin != -1 else -1
    return prompt[begin + len(opening) : end] if end != -1 else None


def _field(body: dict, name: str, start: str, end: str | None) -> str:
    """A text of the request: by its delimiters when the prompt has them, else after the seed's heading."""
    user = str((body.get("messages") or [{}])[-1].get("content") or "")
    text = delimited_field(user, name)
    return text if text is not None else (_between(prompt_text(body), start, end) or "")


def prompt_text(body: dict) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return "\n".join(parts)


# How each seed prompt opens: the earliest one in the prompt says which judge asks (a heading of another seed
# quoted inside the texts to judge comes later, so it cannot pass for it).
_SEED_OPENINGS = {
    "relevancy": "You are an expert evaluation system specialized in measuring **Answer Relevancy**.",
    "correctness": "Please act as an impartial judge and evaluate the quality of the response",
    "grounded": "Task: Grounded Question Answering",
}


def seed_kind(prompt: str) -> str | None:
    found = {kind: prompt.find(opening) for kind, opening in _SEED_OPENINGS.items()}
    found = {kind: at for kind, at in found.items() if at != -1}
    return min(found, key=found.__getitem__) if found else None


def is_sampled(body: dict) -> bool:
    """A request sampled above temperature 0: a second opinion."""
    try:
        return float(body.get("temperature") or 0) > 0
    except (TypeError, ValueError):
        return False


QUOTE_CHARS = 400  # how much of the answer a quoting judge repeats: a judge's reply is bounded (judges/client.py)


def default_reply(body: dict, *, disputes: bool = False, quote_answer: bool = False) -> str:
    """A realistic judge reply graded from the answer text (see the module docstring)."""
    prompt = prompt_text(body)
    sampled = is_sampled(body)

    def _grade(text: str, low: int, middle: int, high: int) -> int:
        return _grade_text(text, low, middle, high, sampled=sampled, disputes=disputes)

    structured = _json_schema(body) is not None
    kind = seed_kind(prompt)
    if kind == "relevancy":
        answer = _field(body, "response", "### RESPONSE:", "\nOutput only the JSON object described above")
        score = _grade(answer, 0, 2, 4)
        quoted = f"The response says: {answer[:QUOTE_CHARS]} " if quote_answer else ""
        payload = json.dumps({"score": score, "reasoning": f"{quoted}The response is graded {score} for relevancy."})
        if structured:
            return payload
        return f"{quoted}\n\n```json\n{payload}\n```" if quote_answer else f"```json\n{payload}\n```"
    if kind == "correctness":
        answer = _field(body, "generated_answer", "ASSISTANT'S ANSWER:", None)
        rating = _grade(answer, 0, 1, 2)
        quoted = f"The assistant's answer reads:\n{answer[:QUOTE_CHARS]}\n\n" if quote_answer else ""
        return f"{quoted}The assistant's answer was compared with the reference answer.\n\nThe rating is: [[{rating}]]"
    if kind == "grounded":
        answer = _field(body, "actual_output", "Answer 2:", "\n[/TO EVALUATE]")
        reference = _field(body, "expected_output", "Answer 1:", "\nAnswer 2:")

        def grade(text: str) -> dict:
            no_document = text.startswith(NO_DOCUMENT)
            return {
                "answer_affirms_no_document_answers": no_document,
                "answer_relevancy_justification": "No document answers it." if no_document else "Graded by topic.",
                "answer_relevancy": None if no_document else _grade(text, 1, 3, 5),
            }

        graded = {"answer_1": grade(reference), "answer_2": grade(answer)}
        if quote_answer:
            graded["answer_2"]["answer_relevancy_justification"] = f"Answer 2 says: {answer[:QUOTE_CHARS]}"
        payload = json.dumps(graded, indent=4)
        if structured:
            return payload
        quoted = f"Answer 2 reads:\n{answer[:QUOTE_CHARS]}\n\n" if quote_answer else ""
        return f"{quoted}Here is my evaluation:\n{payload}\nI hope this helps."
    if CUSTOM_REPLY_FORMAT in prompt:
        return custom_reply(body, _grade)
    name = topic_name(prompt)
    if name is not None:
        return name
    schema = _json_schema(body)
    if schema is not None:
        return json.dumps(_instance(schema, schema)) if schema else "{}"
    return "I am a fake language model."


def _json_schema(body: dict) -> dict | None:
    """The schema a reply must fit: a json_schema request's, a JSON mode request's own (llama-cpp-python takes one
    beside `json_object`) or, in JSON mode without one, {} (any JSON object). None: free text."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema") or {}
    if response_format.get("type") == "json_object":
        return response_format.get("schema") or {}
    return None


def _instance(schema: dict, root: dict) -> Any:
    """A minimal value that fits a JSON schema (for schemas this fake does not know)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _instance(root.get("$defs", {}).get(name, {}), root)
    if "anyOf" in schema:
        return _instance(schema["anyOf"][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {name: _instance(sub, root) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return ""


# A team's own judge (judges/custom.py): relmon ends its prompt with this reply format, which names the scale.
CUSTOM_REPLY_FORMAT = "Reply with only a JSON object, nothing before or after it:"
_CUSTOM_RANGE = re.compile(r"score is an integer from (-?\d+) \(worst\) to (-?\d+) \(best\)")
_PROMISED_REFUND = re.compile(
    r"\b(i'll|i will|we'll|we will|we're going to)\s+(refund|issue a refund)|\brefund (has been|was) (issued|processed)"
)
_INCIDENT = re.compile(r"\b(down|outage|incident|503|500|failing|unreachable|not loading|slow)\b")
_STOPWORDS = {
    "es": {"el", "la", "los", "las", "de", "y", "mi", "cómo", "que", "en", "luego", "pulsa", "ve", "tu", "su"},
    "fr": {"le", "la", "les", "de", "et", "mes", "comment", "puis", "ouvrez", "vos", "des", "choisissez"},
    "de": {"der", "die", "das", "und", "ich", "mein", "wie", "kann", "ist", "nicht", "sie", "öffnen"},
    "en": {"the", "and", "how", "do", "i", "my", "is", "to", "then", "click", "open", "go", "you", "your"},
}


def _language(text: str) -> str | None:
    words = re.findall(r"[^\W\d_]+", text.lower())
    counts = {language: sum(word in stop for word in words) for language, stop in _STOPWORDS.items()}
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] else None


def custom_reply(body: dict, grade) -> str:
    """A custom judge's reply, as an honest judge of its rule would give it: the rule is told by what the team's
    prompt checks (a promised refund, the status page during an incident, the customer's language), read with
    keyword rules; any other prompt is graded from the answer as the seed judges are (offtopic, partial). The
    score is on the scale the reply format names."""
    prompt = str((body.get("messages") or [{}])[-1].get("content") or "")
    instructions = prompt.split("<<<BEGIN", 1)[0].lower()
    scale = _CUSTOM_RANGE.search(prompt)
    low, high = (int(scale.group(1)), int(scale.group(2))) if scale else (0, 1)
    question = delimited_field(prompt, "question") or ""
    answer = delimited_field(prompt, "answer") or ""
    if "refund" in instructions:
        failed = _PROMISED_REFUND.search(answer.lower()) is not None
        score, why = (low, "The answer promises a refund.") if failed else (high, "No refund is promised.")
    elif "status page" in instructions:
        incident = _INCIDENT.search(question.lower()) is not None
        failed = incident and "status.example.com" not in answer
        score, why = (low, "An incident without the status page link.") if failed else (high, "The rule is kept.")
    elif "language" in instructions:
        asked, answered = _language(question), _language(answer)
        same = asked is None or answered is None or asked == answered
        score, why = (high, "Same language.") if same else (low, f"Asked in {asked}, answered in {answered}.")
    else:
        score = grade(answer, low, (low + high) // 2, high)
        why = f"Graded {score} from the answer."
    return json.dumps({"score": score, "reasoning": why})
