"""The group coordinator (Kafka's classic consumer group protocol and offset storage).

:mod:`.group_coordinator` answers the group APIs (JoinGroup in :mod:`.group_join`, a rebalance's steps and
SyncGroup in :mod:`.group_rebalance`, the handlers' values in :mod:`.group_coordinator_types`),
:mod:`.group_metadata_manager` keeps groups and offsets in memory and in ``__consumer_offsets`` (record
layouts: :mod:`.offsets_topic_records`; loading the partitions led here: :mod:`.group_loading`),
:mod:`.group_metadata` and :mod:`.member_metadata` are one group and one member,
:mod:`.offset_and_metadata` one committed offset.
"""
