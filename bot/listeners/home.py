"""Listeners for home (being built)."""

from slack_bolt import App

from store.settings import Settings


def register(app: App, settings: Settings) -> None:
    """Wire this module's listeners onto the app."""
