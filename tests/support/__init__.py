"""Helpers the tests share: harnesses for outside brokers and peers, fake brokers, record
and protocol builders. Nothing here is a test; the package mirrors no part of kcodec."""

from pathlib import Path

#: the checkout's root directory (the parent of ``tests``)
REPO = Path(__file__).resolve().parents[2]
