"""The target assignment of a streams group: active tasks first, then standby tasks (Kafka's sticky task
assignor in outline).

Active tasks: every task goes to one member; a task stays with the member that had it in the previous target
while that member is under its share (each member gets `total // members` tasks, the first `total % members`
members in id order one more), the rest go to the least loaded member, fewest tasks of the same subtopology
first, so a subtopology's tasks spread out. Standby tasks (`num.standby.replicas` copies of each active task):
each copy on a member of a *different process* than the active task and the other copies, preferring the
member that had it before, then the least loaded; a copy that has nowhere to go is left out, as in Kafka.

Warm-up tasks are not assigned, as in Kafka 4.4: its coordinator passes the assignor's target through an
"assignment refiner" (AssignmentRefiner.refine, given the members' task offsets, `group.streams.num.warmup.replicas`
and `acceptable.recovery.lag`) that in 4.4 returns the target unchanged, so a stateful task that moves is
an active task of its new owner at once (differential scenario sg-stateful-task-moves-without-warmup).
"""

from __future__ import annotations

from odradek.coordinator.streams_group import StreamsMember, Task, TaskSets


def assign(members: dict[str, StreamsMember], tasks: list[Task], previous: dict[str, TaskSets],
           num_standby: int) -> dict[str, TaskSets]:
    ids = sorted(members)
    out = {mid: TaskSets() for mid in ids}
    if not ids:
        return out
    quota = {mid: len(tasks) // len(ids) + (1 if i < len(tasks) % len(ids) else 0) for i, mid in enumerate(ids)}
    owner_before = {t: mid for mid, ts in previous.items() if mid in out for t in ts.active}
    free: list[Task] = []
    for task in tasks:
        mid = owner_before.get(task)
        if mid is not None and len(out[mid].active) < quota[mid]:
            out[mid].active.add(task)
        else:
            free.append(task)
    for task in free:
        mid = min(ids, key=lambda m: (len(out[m].active) >= quota[m], len(out[m].active),
                                      sum(1 for t in out[m].active if t[0] == task[0]), m))
        out[mid].active.add(task)
    if num_standby <= 0:
        return out
    active_of = {t: mid for mid, ts in out.items() for t in ts.active}
    standby_before = {}
    for mid, ts in previous.items():
        for t in ts.standby:
            standby_before.setdefault(t, set()).add(mid)
    for task in tasks:
        used = {members[active_of[task]].process_id}
        for _ in range(num_standby):
            candidates = [m for m in ids if members[m].process_id not in used]
            if not candidates:
                break
            mid = min(candidates, key=lambda m: (m not in standby_before.get(task, ()),
                                                 len(out[m].active) + len(out[m].standby), m))
            out[mid].standby.add(task)
            used.add(members[mid].process_id)
    return out
