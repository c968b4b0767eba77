"""A sweep writes each finished chunk on a thread of its own while the next one runs
(``fastsim.sweep.runner.WriteBehind``): what is on disk, what is said and what is raised
must be as when each chunk was written before the next one ran."""
import signal
import threading
import time

import pytest

from fastsim.errors import ConfigError, signal_handlers
from fastsim.sweep.runner import WriteBehind


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fastsim-write")]


def test_chunks_are_written_one_at_a_time_in_order_and_said_once_written():
    events, busy = [], []

    def write(cid, idx, result):
        busy.append(idx)
        assert len(busy) == 1, "two writes in flight"
        time.sleep(0.01)
        events.append(("write", idx, threading.current_thread() is threading.main_thread()))
        busy.pop()

    def written(cid, idx):
        events.append(("written", idx, threading.current_thread() is threading.main_thread()))

    with WriteBehind(write, written) as put:
        for i in range(5):
            put("cell", i, None)
    assert [e[:2] for e in events] == [(k, i) for i in range(5) for k in ("write", "written")]
    assert all(main == (kind == "written") for kind, _, main in events)
    assert not _writer_threads()


def test_a_chunk_is_said_written_before_the_next_one_is_handed_over():
    """``on_chunk`` of chunk k runs before chunk k + 1 is written: a caller stopping the
    sweep there (a test's interruption) leaves chunks 0..k and nothing after them."""
    written_ids = []

    def written(cid, idx):
        written_ids.append(idx)
        if idx == 2:
            raise KeyboardInterrupt

    done = []
    with pytest.raises(KeyboardInterrupt):
        with WriteBehind(lambda cid, idx, result: done.append(idx), written) as put:
            for i in range(6):
                put("cell", i, None)
    assert written_ids == [0, 1, 2]
    assert done == [0, 1, 2]


def test_a_failed_write_is_raised_in_the_calling_thread_and_not_said_written():
    said = []

    def write(cid, idx, result):
        if idx == 1:
            raise ConfigError(f"cannot write chunk {idx} (No space left on device)")

    with pytest.raises(ConfigError, match="cannot write chunk 1"):
        with WriteBehind(write, lambda cid, idx: said.append(idx)) as put:
            for i in range(4):
                put("cell", i, None)
    assert said == [0]
    assert not _writer_threads()


def test_a_failed_last_write_is_raised_at_the_end_of_the_block():
    def write(cid, idx, result):
        raise ConfigError("cannot write the last chunk")

    with pytest.raises(ConfigError, match="the last chunk"):
        with WriteBehind(write, lambda cid, idx: None) as put:
            put("cell", 0, None)


def test_leaving_on_an_error_waits_for_the_write_in_flight(tmp_path):
    """Ctrl-C while the next chunk runs: the chunk being written is complete before the
    block is left (and with it, the sweep directory's lock)."""
    started = threading.Event()

    def write(cid, idx, result):
        started.set()
        time.sleep(0.3)
        (tmp_path / f"chunk-{idx}").write_text("complete")

    with pytest.raises(KeyboardInterrupt):
        with WriteBehind(write, lambda cid, idx: None) as put:
            put("cell", 0, None)
            started.wait()
            raise KeyboardInterrupt
    assert (tmp_path / "chunk-0").read_text() == "complete"
    assert not _writer_threads()


def test_the_error_in_hand_wins_over_a_failed_write_in_flight():
    def write(cid, idx, result):
        time.sleep(0.05)
        raise ConfigError("cannot write")

    with pytest.raises(ValueError, match="the simulation's own"):
        with WriteBehind(write, lambda cid, idx: None) as put:
            put("cell", 0, None)
            raise ValueError("the simulation's own")


def test_inline_writes_in_the_calling_thread():
    threads = []
    with WriteBehind(lambda cid, idx, result: threads.append(threading.current_thread()),
                     lambda cid, idx: threads.append(threading.current_thread()),
                     inline=True) as put:
        put("cell", 0, None)
    assert threads == [threading.main_thread()] * 2


def test_a_signal_while_leaving_waits_for_the_write_in_flight(tmp_path):
    """Ctrl-C arriving, twice, while the block waits for the chunk being written is taken
    once that chunk is on disk, not in the middle of the wait (leaving then would let the
    sweep directory's lock go with the write still running)."""
    started = threading.Event()

    def write(cid, idx, result):
        started.set()
        time.sleep(0.6)
        (tmp_path / f"chunk-{idx}").write_text("complete")

    def interrupt():
        for _ in range(2):
            time.sleep(0.15)  # the block is left by then, and waits for the write
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def taken(signum, frame):
        raise KeyboardInterrupt

    seen = None
    sender = threading.Thread(target=interrupt)
    # this test's own handler, so that no signal of it reaches the test runner's
    with signal_handlers({signal.SIGINT: taken}) as set_here:
        assert set_here, "the test runs in the main thread, where signal handlers are set"
        try:
            with pytest.raises(KeyboardInterrupt):
                try:
                    with WriteBehind(write, lambda cid, idx: None) as put:
                        put("cell", 0, None)
                        started.wait()
                        sender.start()
                        raise ValueError("the next chunk's own error")
                except KeyboardInterrupt:
                    seen = (tmp_path / "chunk-0").exists()
                    raise
        finally:
            if sender.is_alive():
                sender.join()
    assert seen, "the signal was taken before the write in flight had ended"
