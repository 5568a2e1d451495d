"""The offset store: commit, read back, delete, and its log in a data dir (the file and
record format existing data dirs carry)."""

from __future__ import annotations

import json

from kcodec.broker.coordinator.offsets import FILE_NAME, OffsetStore


def test_commit_read_back_and_delete_in_memory():
    s = OffsetStore()
    assert s.committed("g") == {} and not s.has_offsets("g")
    s.commit("g", [("t", 0, 42, 3, "m"), ("t", 1, 7, -1, None), ("u", 0, 1, -1, "")])
    s.commit("h", [("t", 0, 9, -1, None)])
    s.commit("g", [("t", 0, 43, 4, "n")])                 # a later commit replaces
    assert s.committed("g") == {("t", 0): (43, 4, "n"), ("t", 1): (7, -1, None), ("u", 0): (1, -1, "")}
    got = s.committed("g")
    got.clear()                                          # a copy: the store keeps its own
    assert s.has_offsets("g")
    s.delete("g", [("t", 1), ("t", 9)])                  # one it never had: nothing to do
    assert set(s.committed("g")) == {("t", 0), ("u", 0)}
    s.delete_topic("t")                                  # every group's offsets of the topic
    assert s.committed("g") == {("u", 0): (1, -1, "")} and not s.has_offsets("h")
    s.delete_group("g")
    assert s.committed("g") == {} and s.kept_groups() == []
    s.close()


def test_log_reloads_and_compacts(tmp_path):
    s = OffsetStore(str(tmp_path))
    s.log_protocol_type("g", "consumer")
    s.commit("g", [("t", 0, 42, 3, "m"), ("t", 1, 7, -1, None)])
    s.commit("gone", [("t", 0, 1, -1, None)])
    s.commit("h", [("t", 0, 5, -1, None)])
    s.delete("g", [("t", 1)])
    s.delete_group("gone")
    s.log_protocol_type("only-type", "consumer")
    s.close()
    s.commit("g", [("t", 0, 99, -1, None)])              # after close: memory only
    assert s.committed("g")[("t", 0)] == (99, -1, None)

    again = OffsetStore(str(tmp_path))
    assert again.committed("g") == {("t", 0): (42, 3, "m")}
    assert again.committed("h") == {("t", 0): (5, -1, None)} and again.committed("gone") == {}
    # the groups that exist (Empty) after the restart, in log order, with their protocol types
    assert again.kept_groups() == [("g", "consumer"), ("h", None), ("only-type", "consumer")]
    again.close()
    lines = (tmp_path / FILE_NAME).read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == [
        {"g": "g", "pt": "consumer"},
        {"g": "g", "t": "t", "p": 0, "o": 42, "e": 3, "m": "m"},
        {"g": "h", "t": "t", "p": 0, "o": 5, "e": -1, "m": None},
        {"g": "only-type", "pt": "consumer"},
    ]
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()


def test_loads_an_existing_data_dir(tmp_path):
    # a log as the broker has written it: records of several groups interleaved, a record
    # without epoch or metadata, a deleted group that came back, and a torn last line
    recs = [
        {"g": "a", "t": "t", "p": 0, "o": 10, "e": 1, "m": "x"},
        {"g": "b", "pt": "consumer"},
        {"g": "a", "t": "t", "p": 1, "o": 11},
        {"g": "b", "t": "u", "p": 0, "o": 3, "e": -1, "m": None},
        {"g": "a", "t": "t", "p": 0, "del": True},
        {"g": "b", "del": True},
        {"g": "b", "t": "u", "p": 2, "o": 4, "e": -1, "m": None},
    ]
    text = "".join(json.dumps(r) + "\n" for r in recs) + '{"g": "a", "t": "t", "p'
    (tmp_path / FILE_NAME).write_text(text, encoding="utf-8")
    s = OffsetStore(str(tmp_path))
    assert s.committed("a") == {("t", 1): (11, -1, None)}
    assert s.committed("b") == {("u", 2): (4, -1, None)}   # its type went with the delete
    assert s.kept_groups() == [("a", None), ("b", None)]
    s.commit("a", [("t", 5, 50, 2, "y")])
    s.close()
    again = OffsetStore(str(tmp_path))
    assert again.committed("a") == {("t", 1): (11, -1, None), ("t", 5): (50, 2, "y")}
    again.close()


def test_group_metadata_compacts_to_the_latest_of_each_group(tmp_path):
    s = OffsetStore(str(tmp_path))
    s.log_protocol_type("g", "consumer")
    s.log_group_metadata("g", {"gen": 1, "members": [{"id": "a"}]})
    s.commit("g", [("t", 0, 4, -1, None)])
    s.log_group_metadata("g", {"gen": 2, "members": []})
    s.log_group_metadata("gone", {"gen": 7, "members": []})
    s.delete_group("gone")                                # the tombstone drops it too
    s.log_group_metadata("h", {"gen": 3, "members": [{"id": "b"}]})
    s.close()
    again = OffsetStore(str(tmp_path))
    assert again.kept_metadata("g") == {"gen": 2, "members": []}
    assert again.kept_metadata("h") == {"gen": 3, "members": [{"id": "b"}]}
    assert again.kept_metadata("gone") is None and again.kept_metadata("nobody") is None
    assert again.kept_groups() == [("g", "consumer"), ("h", None)]
    again.close()
    lines = (tmp_path / FILE_NAME).read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == [
        {"g": "g", "pt": "consumer"},
        {"g": "g", "gm": {"gen": 2, "members": []}},
        {"g": "g", "t": "t", "p": 0, "o": 4, "e": -1, "m": None},
        {"g": "h", "gm": {"gen": 3, "members": [{"id": "b"}]}},
    ]
