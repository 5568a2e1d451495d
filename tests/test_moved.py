"""Old module paths (the client's before its split by role, the broker's classic group
files before they were named so) still import, with a DeprecationWarning naming the new
one, and give the new module itself."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import kcodec.broker  # noqa: F401 - registers its moved paths
import kcodec.client  # noqa: F401 - registers its moved paths
from kcodec._moved import MOVED, REMOVED_IN, install


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module_with_a_warning(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: the module moved to "
                                               f"{MOVED[old]}; the old path goes in kcodec "
                                               f"{REMOVED_IN[old]}"):
        mod = importlib.import_module(old)
    assert mod is new
    assert mod.__spec__.name == MOVED[old] and mod.__name__ == MOVED[old]


def test_names_import_from_old_paths() -> None:
    for old in ("kcodec.client.group", "kcodec.client.cluster", "kcodec.client.transactions"):
        sys.modules.pop(old, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kcodec.client.cluster import Cluster
        from kcodec.client.group import TopicPartition
        from kcodec.client.transactions import ConsumerGroupMetadata
    from kcodec.client import ConsumerGroupMetadata as Cgm
    from kcodec.client import TopicPartition as Tp
    from kcodec.client.net.cluster import Cluster as NewCluster

    assert (TopicPartition, Cluster, ConsumerGroupMetadata) == (Tp, NewCluster, Cgm)


def test_the_new_paths_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for new in MOVED.values():
            importlib.import_module(new)


def test_only_public_paths_are_kept_and_each_has_a_removal_release() -> None:
    assert all(not any(p.startswith("_") for p in old.split(".")) for old in MOVED)
    assert set(REMOVED_IN) == set(MOVED) and all(REMOVED_IN.values())
    with pytest.raises(ValueError, match="private"):
        install({"kcodec.client._gone": "kcodec.client.net.wire"}, removed_in="0.3")
