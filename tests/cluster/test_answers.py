"""What a worker remembers of its recent answers (cluster/answers.py), so a second copy of a call gets the
same answer again instead of a second run: whole answers only, for a while, within a byte bound."""

from __future__ import annotations

from sie_server.cluster.answers import RecentAnswers


def test_an_answer_that_went_out_whole_is_replayed_as_published() -> None:
    answers = RecentAnswers()
    answers.begin("_INBOX.g.1", seq=7)
    assert answers.working("_INBOX.g.1") == 7 and answers.replay("_INBOX.g.1") is None
    answers.add("_INBOX.g.1", b"part 1")
    answers.add("_INBOX.g.1", b"part 2")
    answers.end("_INBOX.g.1", complete=True)
    assert answers.working("_INBOX.g.1") is None
    assert answers.replay("_INBOX.g.1") == [b"part 1", b"part 2"]
    assert answers.replay("_INBOX.g.2") is None


def test_an_answer_given_up_part_way_is_not_replayed() -> None:
    answers = RecentAnswers()
    answers.begin("_INBOX.g.1", seq=1)
    answers.add("_INBOX.g.1", b"part 1")
    answers.end("_INBOX.g.1", complete=False)  # the caller left the stream, or the answer could not go out
    assert answers.replay("_INBOX.g.1") is None


def test_replies_to_calls_not_begun_here_are_not_kept() -> None:
    answers = RecentAnswers()
    answers.add("_INBOX.g.9", b"dead-letter answer")
    assert answers.replay("_INBOX.g.9") is None


def test_old_answers_are_forgotten_first_within_the_byte_bound() -> None:
    answers = RecentAnswers(max_bytes=10)
    for n in range(3):
        answers.begin(f"r{n}", seq=n)
        answers.add(f"r{n}", b"1234")
        answers.end(f"r{n}", complete=True)
    assert answers.replay("r0") is None  # 12 bytes held: the oldest went
    assert answers.replay("r1") == [b"1234"] and answers.replay("r2") == [b"1234"]


def test_answers_are_forgotten_after_their_time() -> None:
    answers = RecentAnswers(keep_s=0.0)
    answers.begin("r", seq=1)
    answers.add("r", b"x")
    answers.end("r", complete=True)
    assert answers.replay("r") is None
