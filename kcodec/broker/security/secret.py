"""The broker's secret: 32 random bytes that fake SCRAM credentials (and the salts of the
credentials ``kcodec broker --sasl-users`` makes) are derived from.

With a data dir it is kept in ``DATA_DIR/broker.secret`` (made on first use, readable by
its owner only), so a restarted broker answers a SCRAM client-first for any name, known or
not, with the same salt as before: were it new at each start, the salts of unknown names
would change at a restart while those of real users kept in a store would not, which tells
them apart. Without a data dir nothing is kept and each start draws a new one (the
command line then also makes its users' salts anew, so both change together).
"""

from __future__ import annotations

import os

__all__ = ["broker_secret", "SECRET_FILE"]

SECRET_FILE = "broker.secret"
_SIZE = 32


def broker_secret(data_dir: str | os.PathLike | None) -> bytes:
    """The secret kept in ``data_dir`` (made if missing), or a new random one for None."""
    if data_dir is None:
        return os.urandom(_SIZE)
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(os.fspath(data_dir), SECRET_FILE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    secret = os.urandom(_SIZE)
    try:
        os.write(fd, secret)
        os.fsync(fd)
    finally:
        os.close(fd)
    return secret


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            secret = f.read(_SIZE + 1)
    except OSError as exc:
        raise ValueError(f"cannot read the broker secret {path}: {exc.strerror or exc}") from None
    if len(secret) != _SIZE:
        raise ValueError(f"the broker secret {path} is {len(secret)} bytes, not {_SIZE}: it "
                         f"was damaged; delete it to make a new one (SCRAM salts then change "
                         f"once)")
    return secret
