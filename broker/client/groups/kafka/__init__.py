"""Consumer groups coordinated by the brokers with Kafka's classic group protocol (as Kafka's clients).

:mod:`.group_coordinator_lookup` finds the coordinator (FindCoordinator); :mod:`.kafka_coordinator_link` is a
member's link to it; :mod:`.kafka_group_membership` is the member (after Kafka's ``AbstractCoordinator``),
with its :mod:`.kafka_group_rebalance` (JoinGroup, SyncGroup, the leader's assignment) and
:mod:`.kafka_group_offsets` (OffsetCommit, OffsetFetch); :mod:`.consumer_protocol` is the subscription and
assignment bytes of a ``"consumer"`` group, so Lumber members and Kafka clients can lead each other;
:mod:`.kafka_group_admin` is ``lumber groups`` over the group APIs.
"""
