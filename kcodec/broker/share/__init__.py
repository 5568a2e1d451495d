"""Share groups on the share-partition leader (KIP-932): the in-flight records of each
share partition (:mod:`.partition`), the manager that serves ShareFetch and
ShareAcknowledge and keeps the share sessions (:mod:`.manager`), the group configs
(:mod:`.configs`) and the state kept in the data dir (:mod:`.store`). Membership and
assignment are the share-group coordinator's
(:mod:`kcodec.broker.coordinator.share_group`)."""
