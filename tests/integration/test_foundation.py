"""Settings, channel rules and migrations: the foundation every part stands on."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError

from store.db import Database, pending_migrations
from store.models import Judgment, Pair
from store.rules import ChannelRules
from store.settings import Settings, mask


def test_settings_read_the_contract_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELMON_MONITORED_BOTS", "B111, A222 ,U333")
    monkeypatch.setenv("RELMON_THRESHOLD", "3")
    monkeypatch.setenv("RELMON_ALERT_CHANNEL", "C_ALERTS")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api/")
    settings = Settings(_env_file=None)
    assert settings.monitored_bots == ["B111", "A222", "U333"]
    assert settings.threshold == 3
    assert settings.digest_channel == "C_ALERTS"  # defaults to the alert channel
    assert settings.slack_api_url == "http://127.0.0.1:9/api/"


def test_blank_settings_in_a_dotenv_file_mean_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # docker-compose passes `NAME=` lines of .env as empty strings: an empty URL or token would break the clients.
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=\nREDIS_URL=\nSENTRY_DSN=\nOPENAI_API_KEY= \nDATABASE_URL=\n")
    settings = Settings(_env_file=tmp_path / ".env")
    assert settings.openai_base_url is None and settings.redis_url is None and settings.database_url is None
    assert settings.sentry_dsn is None and settings.openai_api_key is None
    assert settings.resolved_database_url.startswith("sqlite:///")
    assert "OPENAI_API_KEY" in settings.missing()


def test_settings_reject_out_of_range_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELMON_THRESHOLD", "7")
    with pytest.raises(ValidationError, match="RELMON_THRESHOLD"):
        Settings(_env_file=None)


def test_missing_settings_are_listed_with_where_to_get_them() -> None:
    message = Settings(_env_file=None).missing_message()
    assert message is not None
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RELMON_MONITORED_BOTS", "RELMON_ALERT_CHANNEL"):
        assert name in message
    complete = Settings(
        _env_file=None,
        slack_bot_token="xoxb-1",
        slack_signing_secret="s",
        monitored_bots=["B1"],
        alert_channel="C1",
        openai_api_key="sk-1",
    )
    assert complete.missing_message() is None


def test_mask_never_shows_the_whole_secret() -> None:
    assert mask("xoxb-1234567890-abcdefgh") == "xoxb-****efgh"
    assert mask("short") == "****"
    assert mask(None) == "(unset)"


def test_channel_rules_layer_over_settings(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(
        "defaults:\n  sample_rate: 0.5\n"
        "channels:\n  C_PRIV:\n    threshold: 3\n    alert_channel: C_PRIV_ALERTS\n    quote_private: true\n"
        "  C_OFF:\n    watch: false\n"
    )
    settings = Settings(_env_file=None, alert_channel="C_ALERTS", watched_channels=["C_SUPPORT"])
    rules = ChannelRules.load(rules_file)
    private = rules.for_channel("C_PRIV", settings)
    assert private.thresholds["relevancy"] == 3
    assert private.alert_channel == "C_PRIV_ALERTS" and private.quote_private
    assert private.sample_rate == 0.5 and private.watch  # named in the rules file
    support = rules.for_channel("C_SUPPORT", settings)
    assert support.thresholds["relevancy"] == 2 and support.alert_channel == "C_ALERTS"
    assert not support.quote_private and support.watch
    assert not rules.for_channel("C_OFF", settings).watch
    assert not rules.for_channel("C_OTHER", settings).watch  # not in RELMON_WATCHED_CHANNELS


def test_rules_file_rejects_unknown_keys(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text("channels:\n  C1:\n    treshold: 3\n")
    with pytest.raises(ValidationError, match="treshold"):
        ChannelRules.load(rules_file)


def test_migrations_create_every_table(database: Database) -> None:
    tables = set(inspect(database.engine).get_table_names())
    assert {"pairs", "judgments", "alerts", "feedback", "digests", "daily_usage"} <= tables


def test_migrations_are_idempotent(database: Database) -> None:
    database.migrate()  # a second run changes nothing
    assert pending_migrations(database.engine) == []


def test_the_migrations_build_every_index_the_models_declare(database: Database) -> None:
    """The models are what the queries are written against; the migrations are what a database has. An index
    declared in one and not built by the other would leave a query scanning a table only in production."""
    from store.models import Base

    inspector = inspect(database.engine)
    for table in Base.metadata.sorted_tables:
        built = {index["name"] for index in inspector.get_indexes(table.name)}
        declared = {index.name for index in table.indexes}
        assert declared <= built, f"{table.name}: {sorted(declared - built)} declared but not migrated"


def test_cached_tokens_migration_keeps_older_judgments_as_uncached(tmp_path) -> None:
    """0004 adds judgments.cached_tokens: a judgment stored at 0003 reads 0 after the upgrade; downgrade works."""
    from alembic import command
    from sqlalchemy import text

    from store.db import alembic_config

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    config = alembic_config(url)
    command.upgrade(config, "0003")
    older = Database(url, pool_size=1)
    try:
        with older.autocommit() as connection:  # the 0003 tables, as they were (the models have moved on)
            connection.execute(text("INSERT INTO pairs (source, channel_id, channel_is_private, answer_ts, "
                                    "answer_text, question_text, version, status, created_at, updated_at) "
                                    "VALUES ('capture', 'C1', 0, '1.000001', 'a', 'q', 1, 'judged', '2026-01-01', "
                                    "'2026-01-01')"))  # fmt: skip
            connection.execute(text("INSERT INTO judgments (pair_id, judge, status, prompt_tokens, completion_tokens, "
                                    "latency_ms, cached, created_at) VALUES (1, 'relevancy', 'ok', 900, 20, 1.0, 0, "
                                    "'2026-01-01')"))  # fmt: skip
        command.upgrade(config, "head")
        assert pending_migrations(older.engine) == []
        with older.session() as session:
            assert session.scalars(select(Judgment.cached_tokens)).all() == [0]
        command.downgrade(config, "0003")
        assert "cached_tokens" not in {c["name"] for c in inspect(older.engine).get_columns("judgments")}
    finally:
        older.dispose()


def test_a_pair_has_one_judgment_per_judge(database: Database) -> None:
    with database.session() as session:
        pair = Pair(channel_id="C1", answer_ts="1.000001", answer_text="a", question_text="q")
        session.add(pair)
        session.flush()
        session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=4))
        pair_id = pair.id
    with pytest.raises(IntegrityError), database.session() as session:
        session.add(Judgment(pair_id=pair_id, judge="relevancy", status="ok", score=1))
    with database.session() as session:
        assert len(session.scalars(select(Judgment)).all()) == 1
