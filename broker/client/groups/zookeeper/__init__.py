"""The paper's consumer groups (section 3.2), coordinated by their members through ZooKeeper.

The znodes, one module each: :mod:`.member_registration` (``/consumers/<group>/ids/<id>``),
:mod:`.partition_owner` (``owners/<topic>/<partition>``), :mod:`.committed_offset`
(``offsets/<topic>/<partition>``), :mod:`.group_assignment` (the generation the leader publishes). The
recipes over them: :mod:`.fenced_election` (the leader election, writes fenced by the winner's candidate
node), :mod:`.group_leader` (computing and publishing the assignment), :mod:`.partition_ownership` (a
member's registration and owned partitions, every commit fenced), :mod:`.group_offsets` (the committed
offsets and the checks that make a commit safe), :mod:`.partition_handover` (claim, fetch, move, stop,
commit, release). :mod:`.group_membership` is a member's whole coordination, built from these;
:mod:`.group_admin` is ``lumber groups`` over ZooKeeper.
"""
