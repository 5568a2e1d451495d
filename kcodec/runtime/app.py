"""The Python entry: ``run(handler, topics=[...], group=...)`` or an ``App``.

    from kcodec.runtime import App

    app = App(topics=["orders"], group="billing", storage="file", sinkers=2)

    @app.handler
    def handle(records):
        return [bill(r.value) for r in records]     # True: done, False: failed

    if __name__ == "__main__":                      # the processes import this module again
        app.run()

Settings are ``kcodec.runtime.Settings``' names (the flags' names with ``_``); ``config``
names a TOML file, and ``KCODEC_RUN_*`` variables apply as for ``kcodec run``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcodec.runtime.config import Settings
from kcodec.runtime.handler import handler_ref

__all__ = ["App", "run"]


def run(handler: str | Callable, *, config: str | None = None, **settings: Any) -> int:
    """Run ``handler`` (a module-level function, or ``"module:function"``) until SIGINT or
    SIGTERM; the exit code (0: stopped cleanly)."""
    from kcodec.runtime.child import setup_logging
    from kcodec.runtime.master import Master

    s = Settings.build(file=config, overrides=settings)
    s.ready()
    ref = handler_ref(handler)
    if not logging.getLogger().handlers:
        setup_logging(s.log_level, "master", s.secrets())
    return Master(s, ref).run()


class App:
    """Settings and a handler, run together."""

    def __init__(self, *, config: str | None = None, **settings: Any) -> None:
        self.config = config
        self.settings = settings
        self._handler: Callable | str | None = None

    def handler(self, fn: Callable) -> Callable:
        """Decorator: ``fn`` is the handler (a list of records a call)."""
        self._handler = fn
        return fn

    def record_handler(self, fn: Callable) -> Callable:
        """Decorator: ``fn`` is the handler, one record a call (raise to fail it alone)."""
        from kcodec.runtime.handler import per_record

        self._handler = per_record(fn)
        return fn

    def run(self, **overrides: Any) -> int:
        """Run the decorated handler with the app's settings (``overrides`` win); returns the
        exit code."""
        if self._handler is None:
            raise ValueError("no handler: decorate one with @app.handler")
        return run(self._handler, config=self.config, **{**self.settings, **overrides})
