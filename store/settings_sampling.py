"""How many answers are judged: RELMON_SAMPLE, a fields class `store.settings.Settings` inherits.

RELMON_SAMPLE is either a rate of the answers (`0.2` or `20%`) or a daily cap (`500/day`): answers whose
conversation signals a failure are always judged, the rest are sampled (workers.sampling, docs/statistics.md).
RELMON_SAMPLE_RATE is the older name of the rate form (`sample_rate`, which the channel rules file also sets).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AliasChoices, BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

_RATE = re.compile(r"^(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<percent>%?)$")
_CAP = re.compile(r"^(?P<cap>\d+)\s*/\s*(?:day|d)$", re.IGNORECASE)
EXAMPLES = "a rate such as 0.2 or 20%, or a daily cap such as 500/day"


@dataclass(frozen=True)
class SamplePlan:
    """What RELMON_SAMPLE says: a fixed `rate` of the unsignalled answers, or a `daily_cap` on them (the rate is
    then decided each day from the expected volume, workers.sampling.daily_probability)."""

    rate: float | None = None
    daily_cap: int | None = None

    def __str__(self) -> str:
        if self.daily_cap is not None:
            return f"{self.daily_cap}/day"
        return f"{(self.rate if self.rate is not None else 1.0) * 100:g}%"


def parse_sample(text: str | float | int) -> SamplePlan:
    """`0.2`, `20%` → a rate; `500/day` → a daily cap. ValueError says what is accepted."""
    if isinstance(text, bool):
        raise ValueError(f"give {EXAMPLES}")
    if isinstance(text, int | float):
        text = str(text)
    value = str(text).strip()
    cap = _CAP.match(value)
    if cap:
        return SamplePlan(daily_cap=int(cap["cap"]))
    rate = _RATE.match(value)
    if not rate:
        raise ValueError(f"{value!r} is not a sampling setting: give {EXAMPLES}")
    number = float(rate["number"]) / (100 if rate["percent"] else 1)
    if not 0 <= number <= 1:
        raise ValueError(f"{value!r} is not between 0 and 1 (0% and 100%): give {EXAMPLES}")
    return SamplePlan(rate=number)


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class SamplingSettings(BaseModel):
    # RELMON_SAMPLE_RATE: the rate form's older name; the channel rules' `sample_rate` default.
    sample_rate: float = Field(1.0, ge=0, le=1, **_env("RELMON_SAMPLE_RATE"))
    # RELMON_SAMPLE: `0.2`, `20%` or `500/day`; unset: RELMON_SAMPLE_RATE (default: every answer).
    sample: Annotated[SamplePlan | None, NoDecode] = Field(None, **_env("RELMON_SAMPLE"))

    @field_validator("sample", mode="before")
    @classmethod
    def _parse_sample(cls, value: object) -> object:
        if value is None or isinstance(value, SamplePlan):
            return value
        if isinstance(value, str) and not value.strip():
            return None  # `RELMON_SAMPLE=` in a .env file: unset
        return parse_sample(value)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _one_rate(self) -> SamplingSettings:
        plan = self.sample
        if plan is None:
            return self
        if "sample_rate" in self.model_fields_set and not (plan.rate is not None and plan.rate == self.sample_rate):
            raise ValueError("set RELMON_SAMPLE only: RELMON_SAMPLE_RATE is its older name, and they differ")
        if plan.rate is not None:
            self.sample_rate = plan.rate  # the channel rules' default rate
        return self

    @property
    def sample_plan(self) -> SamplePlan:
        """RELMON_SAMPLE, or the rate RELMON_SAMPLE_RATE gives."""
        return self.sample if self.sample is not None else SamplePlan(rate=self.sample_rate)
