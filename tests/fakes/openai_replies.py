"""The fake LLM's default replies: realistic judge replies graded from the answer text (see
tests/fakes/openai_server.py for the rules), and a minimal value for any other JSON schema."""

from __future__ import annotations

import json
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


def default_reply(body: dict, *, disputes: bool = False) -> str:
    """A realistic judge reply graded from the answer text (see the module docstring)."""
    prompt = prompt_text(body)
    sampled = is_sampled(body)

    def _grade(text: str, low: int, middle: int, high: int) -> int:
        return _grade_text(text, low, middle, high, sampled=sampled, disputes=disputes)

    structured = _json_schema(body) is not None
    kind = seed_kind(prompt)
    if kind == "relevancy":
        answer = _between(prompt, "### RESPONSE:", "\nOutput only the JSON object described above") or ""
        score = _grade(answer, 0, 2, 4)
        payload = json.dumps({"score": score, "reasoning": f"The response is graded {score} for relevancy."})
        return payload if structured else f"```json\n{payload}\n```"
    if kind == "correctness":
        answer = _between(prompt, "ASSISTANT'S ANSWER:", None) or ""
        rating = _grade(answer, 0, 1, 2)
        return f"The assistant's answer was compared with the reference answer.\n\nThe rating is: [[{rating}]]"
    if kind == "grounded":
        answer = _between(prompt, "Answer 2:", "\n[/TO EVALUATE]") or ""
        reference = _between(prompt, "Answer 1:", "\nAnswer 2:") or ""

        def grade(text: str) -> dict:
            no_document = text.startswith(NO_DOCUMENT)
            return {
                "answer_affirms_no_document_answers": no_document,
                "answer_relevancy_justification": "No document answers it." if no_document else "Graded by topic.",
                "answer_relevancy": None if no_document else _grade(text, 1, 3, 5),
            }

        payload = json.dumps({"answer_1": grade(reference), "answer_2": grade(answer)}, indent=4)
        return payload if structured else f"Here is my evaluation:\n{payload}\nI hope this helps."
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
