"""The runtime's settings: one dataclass, filled from defaults, a TOML file, the environment
and the command line, in that order (each later one wins).

* TOML keys are the flags' names, with ``-`` or ``_`` (``dead-letter-topic = "dlq"``); the
  client's settings go in a ``[client]`` table by their kcodec names
  (``security_protocol = "SASL_SSL"``, see ``kcodec.client.ConsumerConfig``).
* ``KCODEC_RUN_<NAME>`` overrides a setting (``KCODEC_RUN_PULLERS=2``) and
  ``KCODEC_RUN_CLIENT_<NAME>`` a client setting (``KCODEC_RUN_CLIENT_SASL_PASSWORD``: keep
  secrets out of files and command lines).
* A store's own settings (``redis_url``, ``fsync`` ...) are named the same ways, each store
  declaring them as a dataclass (``kcodec.runtime.storage.StoreKind``); they are kept per
  store in ``stores`` and handed to the store that opens (``store_settings``).
* Unknown names and bad values are a ``ValueError`` naming the setting and its source.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Settings", "STORAGES", "load_toml", "client_value", "redact_url", "is_secret"]

STORAGES = ("direct", "file", "redis")   # the built-in choices (plug-ins: storage.stores())
DECODERS = ("raw", "utf8", "json")
# settings the runtime owns: a client setting of that name would fight it
RUNTIME_OWNED = ("group_id", "enable_auto_commit", "bootstrap_servers")
# client hooks the runtime cannot take: its store and handler get the records' bytes
RUNTIME_REFUSED = ("key_deserializer", "value_deserializer", "interceptors")
# producer settings the client table may hold too: the dead-letter producer's
PRODUCER_ONLY = ("partitioner",)
# a client setting whose name holds one of these is a secret: never printed or logged
SECRET_WORDS = ("password", "secret", "token", "credential")


def is_secret(name: str) -> bool:
    """Whether the setting called ``name`` holds a secret (``sasl_password``, ...)."""
    low = name.lower()
    return any(w in low for w in SECRET_WORDS)


def redact_url(url: str) -> str:
    """``url`` with its password (``redis://user:PASSWORD@host``, ``?password=``) as ``***``."""
    from kcodec.observe.log import redact

    scheme, sep, rest = url.partition("://")
    if sep:
        netloc, slash, path = rest.partition("/")
        userinfo, at, host = netloc.rpartition("@")
        if at and ":" in userinfo:
            netloc = f"{userinfo.partition(':')[0]}:***@{host}"
        url = f"{scheme}{sep}{netloc}{slash}{path}"
    return redact(url)


@dataclass
class Settings:
    """Everything ``kcodec run`` needs besides the handler.

    Settings:
        client: the client's settings by their kcodec names (``-X NAME=VALUE``, the
            ``[client]`` table, ``KCODEC_RUN_CLIENT_<NAME>``), given to every consumer and
            producer the runtime makes.
        stores: each registered store's own settings by its name (an instance of the
            dataclass it declares, or a dict of its fields; missing: its defaults). By
            flag, variable or config-file key they are set as the runtime's are
            (``--redis-url``, ``redis-url =``): ``build`` sorts them.
    """

    topics: list[str] = field(default_factory=list)
    group: str = ""
    bootstrap: str = field(default_factory=lambda: os.environ.get("KCODEC_BOOTSTRAP",
                                                                  "127.0.0.1:9092"))
    pullers: int = 1
    sinkers: int = 1
    storage: str = "file"
    state_dir: str = "kcodec-run"
    batch_size: int = 500
    linger_ms: int = 100
    max_pending: int = 100000             # pullers pause fetching past this many waiting
    retries: int = 3
    backoff_ms: int = 1000
    backoff_max_ms: int = 60000
    dead_letter_topic: str | None = None
    handler_timeout: float = 60.0         # seconds a batch may take
    decode: str = "raw"
    handle: str = "batch"                 # batch: a list a call; record: one message a call
    max_rss_mb: int = 0                   # 0: no limit
    grace: float = 30.0
    lease_ms: int = 30000
    control_socket: str = ""              # default: <state_dir>/control.sock
    auto_offset_reset: str = "earliest"
    log_level: str = "INFO"
    metrics_port: int | None = None       # Prometheus metrics of every process (0: any port)
    health_port: int | None = None        # /health and /ready (0: any port)
    group_session_timeout_ms: int | None = None   # consumer protocol: the group's config
    assign: list[str] = field(default_factory=list)   # TOPIC:P or P: no group, these partitions
    client: dict[str, Any] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Check every setting, raising ``ValueError`` naming the first bad one."""
        if isinstance(self.topics, str):
            self.topics = [t for t in self.topics.split(",") if t]
        if not isinstance(self.topics, list) or not all(isinstance(t, str) and t for t in self.topics):
            raise ValueError(f"topics must be a list of topic names, got {self.topics!r}")
        for name in ("pullers", "sinkers", "batch_size", "linger_ms", "max_pending", "retries",
                     "backoff_ms", "backoff_max_ms", "max_rss_mb", "lease_ms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{_flag(name)} must be a non-negative integer, got {v!r}")
        gst = self.group_session_timeout_ms
        if gst is not None and (not isinstance(gst, int) or isinstance(gst, bool) or gst < 1):
            raise ValueError(f"--group-session-timeout-ms must be a positive integer, got {gst!r}")
        for name in ("metrics_port", "health_port"):
            mp = getattr(self, name)
            if mp is not None and (not isinstance(mp, int) or isinstance(mp, bool)
                                   or not 0 <= mp <= 65535):
                raise ValueError(f"{_flag(name)} must be a port number (0-65535), got {mp!r}")
        if isinstance(self.assign, str):
            self.assign = [a for a in self.assign.split(",") if a]
        self.assigned_partitions()      # raises ValueError naming a bad item
        for name in ("pullers", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{_flag(name)} must be at least 1, got {getattr(self, name)}")
        if self.storage != "direct" and self.sinkers < 1:
            raise ValueError(f"--sinkers must be at least 1 with --storage {self.storage}")
        if self.lease_ms < 1000:
            raise ValueError(f"--lease-ms must be at least 1000, got {self.lease_ms}")
        for name in ("handler_timeout", "grace"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"{_flag(name)} must be a positive number of seconds, got {v!r}")
            setattr(self, name, float(v))
        from kcodec.runtime.storage import store_names

        for name, allowed in (("storage", store_names()), ("decode", DECODERS),
                              ("handle", ("batch", "record")),
                              ("auto_offset_reset", ("earliest", "latest", "none"))):
            if getattr(self, name) not in allowed:
                from kcodec.runtime.storage import BROKEN

                why = f" ({BROKEN[self.storage]})" if name == "storage" and \
                    self.storage in BROKEN else ""
                raise ValueError(f"{_flag(name)} must be one of {', '.join(allowed)}, "
                                 f"got {getattr(self, name)!r}{why}")
        self._check_stores()
        if self.dead_letter_topic is not None and not (isinstance(self.dead_letter_topic, str)
                                                       and self.dead_letter_topic):
            raise ValueError("--dead-letter-topic must be a topic name")
        if not isinstance(self.client, dict):
            raise ValueError(f"client must be a table of client settings, got {self.client!r}")
        from kcodec.client import ConsumerConfig

        names = {f.name for f in dataclasses.fields(ConsumerConfig)} | set(PRODUCER_ONLY)
        for k in list(self.client):
            key = k.replace(".", "_").replace("-", "_")
            if key != k:
                self.client[key] = self.client.pop(k)
            if key not in names:
                raise ValueError(f"unknown client setting {k!r} (the kcodec names of "
                                 "kcodec.client.ConsumerConfig, e.g. security_protocol)")
            if key in RUNTIME_OWNED:
                raise ValueError(f"client setting {key!r} is the runtime's: use "
                                 f"{ {'group_id': '--group', 'bootstrap_servers': '--bootstrap'}.get(key, 'nothing (offsets are committed by the runtime)')}")
            if key in RUNTIME_REFUSED:
                raise ValueError(f"client setting {key!r} is not for kcodec run: the store "
                                 "and the handler get the records' bytes (--decode utf8 or "
                                 "json decodes values); decode or filter in the handler")

    def _check_stores(self) -> None:
        """``stores`` as each store's settings dataclass, every field checked (whichever
        store is chosen: a bad value is an error wherever it is given)."""
        from kcodec.runtime.storage import store_settings_fields, stores

        if not isinstance(self.stores, dict):
            raise ValueError(f"stores must be a table of each store's settings, "
                             f"got {self.stores!r}")
        known = stores()
        unknown = sorted(set(self.stores) - set(known))
        if unknown:
            raise ValueError(f"settings of no store: {', '.join(map(repr, unknown))} (the "
                             f"stores: {', '.join(known)})")
        out: dict[str, Any] = {}
        for name, kind in known.items():
            cls = kind.settings_class()
            if cls is None:
                continue
            given = self.stores.get(name)
            if given is None:
                given = cls()
            elif isinstance(given, dict):
                names = {f.name for f in dataclasses.fields(cls)}
                bad = sorted(set(given) - names)
                if bad:
                    raise ValueError(f"unknown setting {bad[0]!r} of the store {name!r} (its "
                                     f"settings: {', '.join(sorted(names)) or 'none'})")
                given = cls(**given)
            elif not isinstance(given, cls):
                raise ValueError(f"the settings of the store {name!r} must be a "
                                 f"{cls.__name__} or a dict, got {given!r}")
            for f in store_settings_fields(kind):
                _check_store_value(f, getattr(given, f.name))
            out[name] = given
        self.stores = out

    def store_settings(self, name: str | None = None) -> Any:
        """The settings of the store ``name`` (default: the chosen one; ``direct`` keeps
        its failed queue in a file store), an instance of its dataclass; None for a store
        that declares none."""
        if name is None:
            name = "file" if self.storage == "direct" else self.storage
        return self.stores.get(name)

    def ready(self) -> None:
        """The checks that need the whole picture (before starting)."""
        if not self.topics:
            raise ValueError("no topic: give -t/--topic (or topics = [...] in the config file)")
        if not self.group:
            raise ValueError("no group: give -g/--group (or group = \"...\" in the config file;"
                             " with --assign the group only keeps the committed offsets)")
        if self.assign:
            tps = self.assigned_partitions()
            unknown = sorted({t for t, _ in tps} - set(self.topics))
            if unknown:
                raise ValueError(f"--assign names {', '.join(unknown)}, not among the topics "
                                 "(-t)")
            if len(tps) < self.pullers:
                raise ValueError(f"--assign gives {len(tps)} partitions to {self.pullers} "
                                 "pullers: each puller needs one at least")
        self.consumer_config()   # every client setting valid together
        if self.client.get("tracing_enabled"):   # here, once, not in every restarted child
            from kcodec.observe.tracing import require

            try:
                require()
            except ImportError as exc:
                raise ValueError(f"-X tracing_enabled=true: {exc}") from None

    # ------------------------------------------------------------------ derived
    def assigned_partitions(self) -> list[tuple[str, int]]:
        """``assign`` as (topic, partition) pairs: ``TOPIC:P``, or ``P`` for every topic."""
        if not isinstance(self.assign, list):
            raise ValueError(f"--assign must be a list of TOPIC:PARTITION, got {self.assign!r}")
        out: list[tuple[str, int]] = []
        for item in self.assign:
            topic, sep, part = str(item).rpartition(":")
            try:
                p = int(part)
            except ValueError:
                p = -1
            if p < 0 or (sep and not topic):
                raise ValueError(f"--assign takes TOPIC:PARTITION or PARTITION (of every "
                                 f"topic), got {item!r}")
            for t in ([topic] if sep else self.topics):
                if (t, p) not in out:
                    out.append((t, p))
        return out

    def my_partitions(self, slot: int) -> list[tuple[str, int]]:
        """The ``assign``ed partitions puller ``slot`` reads (dealt out round-robin)."""
        return self.assigned_partitions()[slot::self.pullers]

    @property
    def socket_path(self) -> str:
        """The control socket's path (``control_socket``, or ``<state_dir>/control.sock``)."""
        return self.control_socket or os.path.join(self.state_dir, "control.sock")

    def client_settings(self) -> dict[str, Any]:
        """The client settings: ``bootstrap_servers`` and the ``client`` table."""
        return {"bootstrap_servers": self.bootstrap, **self.client}

    def consumer_config(self) -> dict[str, Any]:
        """The pullers' consumer settings, checked by ``ConsumerConfig``."""
        from kcodec.client import ConsumerConfig

        # a member killed with -9 holds its partitions until its session times out (unless
        # the master removes it, which it does for its own dead pullers): 10 s, not Kafka's
        # 45 s, where the client sets it (classic protocol; the consumer protocol's is the
        # broker's group.consumer.session.timeout.ms)
        cfg = {"auto_offset_reset": self.auto_offset_reset,
               "max_poll_records": max(self.batch_size, 1),
               "session_timeout_ms": 10000, "heartbeat_interval_ms": 1000,
               **{k: v for k, v in self.client_settings().items() if k not in PRODUCER_ONLY},
               "group_id": self.group, "enable_auto_commit": False}
        ConsumerConfig.from_kwargs(cfg)   # raises ValueError naming a bad setting
        return cfg

    def producer_config(self) -> dict[str, Any]:
        """The client settings a producer takes (dead-letter topic)."""
        from kcodec.client import ProducerConfig

        names = {f.name for f in dataclasses.fields(ProducerConfig)}
        return {k: v for k, v in self.client_settings().items() if k in names}

    def admin_config(self) -> dict[str, Any]:
        """The client settings an admin client takes."""
        from kcodec.client import AdminConfig

        names = {f.name for f in dataclasses.fields(AdminConfig)}
        return {k: v for k, v in self.client_settings().items() if k in names}

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (secrets included: for the runtime's processes)."""
        return dataclasses.asdict(self)

    def _store_values(self) -> list[tuple[dataclasses.Field, Any]]:
        return [(f, getattr(cfg, f.name)) for cfg in self.stores.values()
                for f in dataclasses.fields(cfg)]

    def shown(self) -> dict[str, Any]:
        """The settings as a plain dict with every secret replaced by ``***`` (for printing):
        the stores' settings beside the runtime's, by their names (as a config file has
        them)."""
        d = self.to_dict()
        del d["stores"]
        for f, v in self._store_values():
            secret = f.metadata.get("secret")
            d[f.name] = redact_url(v) if secret == "url" and isinstance(v, str) else \
                "***" if secret and v is not None else v
        d["client"] = {k: ("***" if is_secret(k) and v is not None else v)
                       for k, v in d["client"].items()}
        return d

    def secrets(self) -> list[str]:
        """Every secret's text, for the log formatter to blank out wherever it appears."""
        out = [str(v) for k, v in self.client.items() if is_secret(k) and isinstance(v, str) and v]
        for f, v in self._store_values():
            secret = f.metadata.get("secret")
            if secret == "url" and isinstance(v, str):
                out += _url_password(v)
            elif secret and isinstance(v, str) and v:
                out.append(v)
        return sorted(set(out), key=len, reverse=True)

    # ------------------------------------------------------------------ sources
    @classmethod
    def runtime_names(cls) -> list[str]:
        """The names of the runtime's own settings (``client`` and ``stores`` included)."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def names(cls) -> list[str]:
        """The names of every setting: the runtime's, then every registered store's."""
        from kcodec.runtime.storage import setting_owners

        return cls.runtime_names() + list(setting_owners())

    @classmethod
    def build(cls, file: str | None = None, env: dict[str, str] | None = None,
              overrides: dict[str, Any] | None = None,
              defaults: dict[str, Any] | None = None) -> Settings:
        """``defaults`` (the built-in ones where not given) < ``file`` (TOML) < ``env``
        (``KCODEC_RUN_*``) < ``overrides``."""
        from kcodec.runtime.storage import setting_owners

        owners = setting_owners()
        names = set(cls.names()) - {"client", "stores"}
        base = dict(defaults or {})
        for own in (base.pop("stores", None) or {}).values():   # to_dict's form
            base.update(own if isinstance(own, dict) else dataclasses.asdict(own))
        values: dict[str, Any] = {k: v for k, v in base.items() if k in names}
        client: dict[str, Any] = dict((defaults or {}).get("client") or {})
        if file:
            data = load_toml(file)
            c = data.pop("client", {})
            if not isinstance(c, dict):
                raise ValueError(f"{file}: [client] must be a table of client settings")
            client.update(c)
            for k, v in data.items():
                key = k.replace("-", "_")
                if key not in names:
                    raise ValueError(f"{file}: unknown setting {k!r} (the keys are the flags' "
                                     "names: pullers, storage, dead-letter-topic, ...)")
                values[key] = v
        for k, v in (os.environ if env is None else env).items():
            if k.startswith("KCODEC_RUN_CLIENT_"):
                name = k[len("KCODEC_RUN_CLIENT_"):].lower()
                client[name] = client_value(name, v, k)
            elif k.startswith("KCODEC_RUN_"):
                name = k[len("KCODEC_RUN_"):].lower()
                if name not in names:
                    raise ValueError(f"unknown environment setting {k} (KCODEC_RUN_<FLAG> with the "
                                     "flag's name in capitals, e.g. KCODEC_RUN_PULLERS)")
                values[name] = _convert(name, v, k)
        stores: dict[str, dict[str, Any]] = {}
        for k, v in (overrides or {}).items():
            if k == "client":
                client.update(v)
            elif k == "stores":
                for store, own in (v or {}).items():
                    stores.setdefault(store, {}).update(own)
            elif v is not None:
                values[k] = v
        for k in [k for k in values if k in owners]:
            stores.setdefault(owners[k].name, {})[k] = values.pop(k)
        return cls(**values, client=client, stores=stores)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _url_password(url: str) -> list[str]:
    """The password of ``scheme://user:PASSWORD@host/...`` as written and unquoted."""
    _scheme, _sep, rest = url.partition("://")
    userinfo, at, _host = rest.partition("/")[0].rpartition("@")
    if at and ":" in userinfo and userinfo.partition(":")[2]:
        from urllib.parse import unquote

        pw = userinfo.partition(":")[2]
        return [pw, unquote(pw)]
    return []


def _check_store_value(f: dataclasses.Field, v: Any) -> None:
    """A store setting's value against its declaration: an ``int`` a non-negative integer,
    a ``float`` a number, a ``bool`` a bool, a ``str`` a string, one of ``choices`` where it has them (the
    dataclass's own ``__post_init__`` may check more)."""
    kind = _type_name(f)
    if "|None" in kind and v is None:
        return
    base = kind.split("|")[0]
    if base == "int" and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        raise ValueError(f"{_flag(f.name)} must be a non-negative integer, got {v!r}")
    if base == "float" and (isinstance(v, bool) or not isinstance(v, (int, float))):
        raise ValueError(f"{_flag(f.name)} must be a number, got {v!r}")
    if base == "bool" and not isinstance(v, bool):
        raise ValueError(f"{_flag(f.name)} must be true or false, got {v!r}")
    if base == "str" and not isinstance(v, str):
        raise ValueError(f"{_flag(f.name)} must be a string, got {v!r}")
    choices = f.metadata.get("choices")
    if choices is not None and v not in choices:
        raise ValueError(f"{_flag(f.name)} must be one of {', '.join(choices)}, got {v!r}")


def _type_name(f: dataclasses.Field) -> str:
    """A field's type as written (``"int | None"``), with or without postponed annotations."""
    t = f.type
    return (t.__name__ if isinstance(t, type) else str(t)).replace(" ", "")


def _field_type(cls: type, name: str) -> str:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return _type_name(f)
    raise KeyError(name)


def _typed(kind: str, raw: str, where: str) -> Any:
    kind = kind.replace(" ", "")
    if "|None" in kind and raw.lower() in ("", "none", "null"):
        return None
    base = kind.split("|")[0]
    try:
        if base == "int":
            return int(raw)
        if base == "float":
            return float(raw)
        if base == "bool":
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if base.startswith("list"):
            return [x.strip() for x in raw.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{where}: expected {base}, got {raw!r}") from None
    return raw


def _convert(name: str, raw: str, where: str) -> Any:
    from kcodec.runtime.storage import setting_owners

    owner = setting_owners().get(name)
    cls = owner.settings_class() if owner is not None else None
    return _typed(_field_type(cls or Settings, name), raw, where)


def client_value(name: str, raw: Any, where: str) -> Any:
    """A client setting given as text (environment, ``--client k=v``) in its own type."""
    from kcodec.client import ConsumerConfig, ProducerConfig

    if not isinstance(raw, str):
        return raw
    try:
        kind = _field_type(ProducerConfig if name in PRODUCER_ONLY else ConsumerConfig, name)
    except KeyError:
        raise ValueError(f"{where}: unknown client setting {name!r}") from None
    return _typed(kind, raw, where)


def load_toml(path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:   # pragma: no cover - 3.9/3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ValueError("reading a TOML config file on Python < 3.11 needs the tomli "
                             "package: pip install tomli") from None
    try:
        with open(path, "rb") as f:
            return dict(tomllib.load(f))
    except OSError as exc:
        raise ValueError(f"cannot read the config file {path!r}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
