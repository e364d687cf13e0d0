"""The follower's side of a fetch session (cluster/fetcher.py FollowerSession): what each Fetch names and
forgets, and how answers and errors move the session on."""

from odradek.cluster.fetcher import FollowerSession
from odradek.protocol.errors import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def test_a_session_is_asked_for_then_only_changes_are_named() -> None:
    session = FollowerSession()
    wanted = {A: (0, 0, 100, 1), B: (5, 0, 100, 1)}
    named, forgotten = session.request(wanted)
    assert (session.session_id, session.epoch) == (0, 0)  # full, asking for a session
    assert named == wanted and forgotten == []
    session.answered(ErrorCode.NONE, 77)
    assert (session.session_id, session.epoch) == (77, 1)

    # A moved on, B did not, C is new
    named, forgotten = session.request({A: (3, 0, 100, 1), B: (5, 0, 100, 1), C: (0, 0, 100, 2)})
    assert named == {A: (3, 0, 100, 1), C: (0, 0, 100, 2)} and forgotten == []
    session.answered(ErrorCode.NONE, 77)
    assert session.epoch == 2

    # B is no longer fetched (delayed or gone): it is forgotten; a throttle changes A's max bytes
    named, forgotten = session.request({A: (3, 0, 10, 1), C: (0, 0, 100, 2)})
    assert named == {A: (3, 0, 10, 1)} and forgotten == [B]
    session.answered(ErrorCode.NONE, 77)
    named, forgotten = session.request({A: (3, 0, 10, 1), C: (0, 0, 100, 2)})
    assert named == {} and forgotten == []


def test_errors_and_lost_answers_start_a_new_session() -> None:
    for error in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH, None):
        session = FollowerSession()
        session.request({A: (0, 0, 100, 1)})
        session.answered(ErrorCode.NONE, 9)
        session.request({A: (4, 0, 100, 1)})
        if error is None:
            session.reset()  # the answer never came
        else:
            session.answered(error, 0)
        named, forgotten = session.request({A: (4, 0, 100, 1), B: (1, 0, 100, 1)})
        # a full fetch again, closing the old session (its id is sent with epoch 0)
        assert session.epoch == 0 and session.session_id == 9
        assert named == {A: (4, 0, 100, 1), B: (1, 0, 100, 1)} and forgotten == []
        session.answered(ErrorCode.NONE, 10)
        assert (session.session_id, session.epoch) == (10, 1)


def test_a_leader_that_makes_no_session_gets_full_fetches() -> None:
    session = FollowerSession()
    session.request({A: (0, 0, 100, 1)})
    session.answered(ErrorCode.NONE, 0)
    assert (session.session_id, session.epoch) == (0, 0)
    named, _ = session.request({A: (2, 0, 100, 1)})
    assert named == {A: (2, 0, 100, 1)}
