"""The Slack app manifest relmon ships (`bot/manifest.yml`, package data), printed by `relmon manifest`."""

from __future__ import annotations

from importlib.resources import files

import yaml


def manifest_yaml() -> str:
    return files("bot").joinpath("manifest.yml").read_text(encoding="utf-8")


def manifest() -> dict:
    return yaml.safe_load(manifest_yaml())
