"""A Slack workspace export (zip): `channels.json` (and `groups.json`, `mpims.json`, `dms.json` for private
channels, group DMs and DMs), `users.json`, and one folder per channel, named by the channel's name, of
`YYYY-MM-DD.json` files, each a JSON array of messages in the Web API's shape. Read one day file at a time (the
zip is never unpacked whole)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from capture.directory import ChannelFlags, flags_from_info

# The export's lists of conversations that are not public channels: private channels, group DMs and DMs.
PRIVATE_LISTS = ("groups.json", "mpims.json", "dms.json")


@dataclass(frozen=True)
class ExportChannel:
    id: str
    name: str
    flags: ChannelFlags
    members: tuple[str, ...] = ()  # as the export lists them: who is staff by the alert channel, without Slack


class ExportError(Exception):
    """The file is not a Slack export relmon can read."""


class SlackExport:
    def __init__(self, path: str) -> None:
        try:
            self.zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as error:
            raise ExportError(f"{path} is not a readable zip file: {error}") from error
        self.names = self.zip.namelist()
        # Exports made by some tools nest everything in one top folder.
        roots = [n for n in self.names if PurePosixPath(n).name == "channels.json"]
        if not roots:
            raise ExportError(f"{path} has no channels.json: not a Slack workspace export")
        self.base = str(PurePosixPath(roots[0]).parent).removeprefix(".")
        # Day files that could not be read (path -> why), each skipped and named at the end of the import.
        self.bad_days: dict[str, str] = {}

    def _path(self, *parts: str) -> str:
        return "/".join(p for p in (self.base, *parts) if p)

    def _json(self, name: str) -> Any:
        try:
            with self.zip.open(self._path(name)) as handle:
                return json.load(handle)
        except KeyError:
            return []
        except ValueError as error:
            raise ExportError(f"{name} in the export is not JSON: {error}") from error
        except RecursionError:
            raise ExportError(f"{name} in the export is JSON nested too deeply: not Slack's") from None
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise ExportError(f"{name} cannot be read from the export: {error}") from error

    def channels(self) -> list[ExportChannel]:
        """Public channels from channels.json; private channels from groups.json, group DMs from mpims.json and
        DMs from dms.json (each file where the export has it). Sharing with another workspace or organisation
        comes from the entry's own flags (is_ext_shared, is_shared, is_org_shared)."""
        listed = [(entry, False) for entry in self._json("channels.json")]
        listed += [(entry, True) for name in PRIVATE_LISTS for entry in self._json(name)]
        channels = []
        for entry, private in listed:
            if not (isinstance(entry, dict) and entry.get("id")):
                continue
            flags = flags_from_info({**entry, "is_private": private or entry.get("is_private") is True})
            members = tuple(str(m) for m in entry.get("members") or [] if isinstance(m, str))
            channels.append(ExportChannel(str(entry["id"]), str(entry.get("name") or entry["id"]), flags, members))
        return channels

    def user_names(self) -> dict[str, str]:
        """Display names by user ID. A bad users.json costs only the names (noted in `bad_days`), not the import."""
        names = {}
        try:
            users = self._json("users.json")
        except ExportError as error:
            self.bad_days[self._path("users.json")] = f"{error}: people are named by their IDs"
            users = []
        for user in users if isinstance(users, list) else []:
            if isinstance(user, dict) and user.get("id"):
                profile = user.get("profile") or {}
                names[user["id"]] = profile.get("display_name") or user.get("real_name") or user.get("name") or ""
        return {k: v for k, v in names.items() if v}

    def days(self, channel: ExportChannel) -> Iterator[list[dict[str, Any]]]:
        """The channel's day files, newest day first, each read only when asked for. A day file that is not a
        JSON array (cut short, not UTF-8, damaged in the zip) is skipped and noted in `bad_days`: one bad day
        does not cost the others."""
        folder = self._path(channel.name) + "/"
        days = sorted((n for n in self.names if n.startswith(folder) and n.endswith(".json")), reverse=True)
        for day in days:
            content = self._day(day)
            if content is None:
                continue
            messages = [m for m in content if isinstance(m, dict) and _has_ts(m)]
            if len(messages) < len(content):
                self.bad_days[day] = f"{len(content) - len(messages)} entry(ies) without a message's ts left out"
            yield messages

    def _day(self, day: str) -> list[Any] | None:
        try:
            with self.zip.open(day) as handle:
                content = json.load(handle)
        except ValueError as error:  # JSON and UTF-8 errors both
            self.bad_days[day] = f"not JSON ({error})"
            return None
        except RecursionError:
            self.bad_days[day] = "JSON nested too deeply: not Slack's"
            return None
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            self.bad_days[day] = f"cannot be read from the zip ({error})"
            return None
        if not isinstance(content, list):
            self.bad_days[day] = "not a list of messages"
            return None
        return content


def _has_ts(message: dict[str, Any]) -> bool:
    """A message has a ts Slack would give it ("1796477420.000100"): everything is ordered and keyed by it."""
    ts = message.get("ts")
    if not isinstance(ts, str):
        return False
    try:
        float(ts)
    except ValueError:
        return False
    return True
