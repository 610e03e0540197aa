"""The fake LLM's `/v1/embeddings` answers as OpenAI does, through the real openai SDK."""

from __future__ import annotations

import httpx
import numpy as np
import openai


def test_embeddings_answer_as_openais_do(llm):
    client = openai.OpenAI(base_url=llm.base_url, api_key="sk-test", max_retries=0)
    texts = ["Refund my annual plan", "annual plan refunds", "reset my password"]
    reply = client.embeddings.create(model="text-embedding-3-small", input=texts)
    assert llm.embedding_requests[0]["encoding_format"] == "base64"  # what the SDK asks for
    vectors = np.array([item.embedding for item in reply.data])
    assert vectors.shape == (3, 1536) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.9 > vectors[0] @ vectors[2]
    assert reply.usage.prompt_tokens == reply.usage.total_tokens > 0
    again = client.embeddings.create(model="text-embedding-3-small", input=texts[0], dimensions=256)
    assert len(again.data[0].embedding) == 256


def test_errors_as_openai_answers_them(llm):
    with httpx.Client(base_url=llm.base_url) as http:
        unknown = http.post("/embeddings", json={"model": "gpt-nope", "input": "x"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
        empty = http.post("/embeddings", json={"model": "text-embedding-3-small", "input": [""]})
        assert empty.status_code == 400 and empty.json()["error"]["param"] == "input"
        floats = http.post("/embeddings", json={"model": "text-embedding-3-small", "input": ["a b c"]})
        assert isinstance(floats.json()["data"][0]["embedding"], list)
        llm.set_behavior(embeddings=False)
        assert http.post("/embeddings", json={"model": "text-embedding-3-small", "input": "x"}).status_code == 404
        llm.set_behavior(api_key="sk-right")
        assert http.post("/embeddings", json={"model": "text-embedding-3-small", "input": "x"}).status_code == 401


def test_the_naming_prompt_gets_a_bad_name_first_when_told(llm):
    """`bad_names_first`: the first naming replies are a bad name, as a chat completion; then the usual name, from
    the listed questions only (not the rejected name or what was wrong with it)."""
    from topics.naming import naming_messages

    client = openai.OpenAI(base_url=llm.base_url, api_key="sk-test", max_retries=0)
    examples = ["Refund my annual plan", "annual plan refunds", "refund for the annual plan"]
    llm.set_behavior(bad_names_first=1, bad_name="C0SUPPORT1")
    first = client.chat.completions.create(model="gpt-4o-mini", messages=naming_messages(examples))
    assert first.choices[0].message.content == "C0SUPPORT1" and first.choices[0].finish_reason == "stop"
    again = naming_messages(examples, ("C0SUPPORT1", "it holds an ID"))
    second = client.chat.completions.create(model="gpt-4o-mini", messages=again)
    assert second.choices[0].message.content == "Annual and plan questions"
    judge = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello"}])
    assert judge.choices[0].message.content != "C0SUPPORT1"  # only naming prompts get it
