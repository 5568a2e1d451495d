"""Secrets stay out of every print and log line of ``kcodec run``: the Redis URL's password,
the client's SASL/TLS passwords, in ``--print-config``, warnings and tracebacks alike."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from kcodec.runtime.child import RedactingFormatter
from kcodec.runtime.config import Settings, redact_url
from tests.runtime.support import ROOT, env


def test_redact_url_hides_the_password_only() -> None:
    assert redact_url("redis://:hunter2@db:6379/0") == "redis://:***@db:6379/0"
    assert redact_url("rediss://app:hunter2@db/1") == "rediss://app:***@db/1"
    assert redact_url("redis://db:6379/0?password=hunter2") == "redis://db:6379/0?password=***"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_print_config_hides_every_secret(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kcodec", "run", "tests.runtime.handlers:record", "-t", "x",
         "-g", "g", "--redis-url", "redis://:hunter2@127.0.0.1:1/0", "-X", "ssl_password=k3y",
         "-X", "sasl_password=s3cret", "--print-config"],
        env=env(), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    for secret in ("hunter2", "k3y", "s3cret"):
        assert secret not in out.stdout
    shown = json.loads(out.stdout)
    assert shown["redis_url"] == "redis://:***@127.0.0.1:1/0"
    assert shown["client"] == {"ssl_password": "***", "sasl_password": "***"}


def test_log_lines_and_tracebacks_never_show_a_secret() -> None:
    s = Settings.build(env={}, overrides={"redis_url": "redis://:p%40ss@h/0",
                                          "client": {"sasl_password": "s3cret"}})
    fmt = RedactingFormatter("%(levelname)s %(message)s", s.secrets())
    try:
        raise ConnectionError("AUTH s3cret refused for redis://:p@ss@h/0")
    except ConnectionError:
        rec = logging.LogRecord("kcodec.runtime", logging.WARNING, __file__, 1,
                                "redis at %s: %s", ("redis://:p@ss@h/0", "password=p@ss"),
                                sys.exc_info())
    text = fmt.format(rec)
    assert "s3cret" not in text and "p@ss" not in text and "p%40ss" not in text
    assert "redis at redis://:***@h/0" in text


def test_redis_store_messages_name_the_server_without_its_password(redis_server) -> None:
    from kcodec.runtime.storage.redis import RedisStore

    url = redis_server.url.replace("redis://", "redis://:hunter2@")
    st = RedisStore(url, "kcodec:t-secret", "p0", give_up_s=0.2)
    try:
        assert "hunter2" not in st.url and ":***@" in st.url
    finally:
        st.close()
