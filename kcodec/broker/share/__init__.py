"""Share groups on the share-partition leader (KIP-932).

    partition.py   a share partition: its in-flight records, as one share group sees them
    manager.py     every share partition this cluster leads, the share sessions, and the
                   work of ShareFetch and ShareAcknowledge (Kafka's SharePartitionManager)
    configs.py     group configs: the broker's defaults and the per-group overrides
    store.py       share-group state in ``share_groups.jsonl`` of the data dir

Membership and assignment are the share-group coordinator's
(:mod:`kcodec.broker.coordinator.share_group`).
"""
