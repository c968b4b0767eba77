"""What a local cluster's worker process sets in itself, from its first start and again
whenever distributed restarts it (a ``WorkerPlugin``'s ``setup`` runs on every worker that
joins, a replaced one too; ``runner._connect`` registers it).

* SIGINT ignored: Ctrl-C goes to the terminal's whole process group, and each worker
  printed its own KeyboardInterrupt traceback around fastsim's one line, while fastsim,
  which takes the Ctrl-C, stops the workers anyway.  The workers first started inherit
  the ignored SIGINT (``runner._workers_deaf_to_ctrl_c``); a worker that its nanny starts
  later does not, since fastsim's own handler is back by then.
* distributed's "Async instruction for <Task ...> ended with CancelledError" unsaid: a
  worker closed while it fetches or runs a chunk logs it (distributed: "this should
  exclusively happen in Worker.close()"), and fastsim closes them on Ctrl-C.
* distributed's "Failed to communicate with scheduler during heartbeat" unsaid, with its
  traceback: a worker whose heartbeat falls between the scheduler's close and its own
  logs it as fastsim stops the cluster (on Ctrl-C, seen on a loaded machine); a scheduler
  lost mid-sweep is fastsim's own one line, from the client's side.

Imported by ``runner`` only on the Dask backend, as ``distributed`` is (the in-process
backend never loads it).
"""
from __future__ import annotations

import logging
import signal
import threading

from distributed import WorkerPlugin

NAME = "fastsim-sweep-worker"
STATE_MACHINE_LOGGER = "distributed.worker.state_machine"


WORKER_LOGGER = "distributed.worker"


def _not_a_closing_cancel(record: logging.LogRecord) -> bool:
    return not (record.levelno == logging.WARNING
                and record.getMessage().endswith("ended with CancelledError"))


def _not_a_lost_heartbeat(record: logging.LogRecord) -> bool:
    return not (record.levelno == logging.ERROR and record.getMessage().startswith(
        "Failed to communicate with scheduler during heartbeat"))


class SweepWorkerPlugin(WorkerPlugin):
    """Ignore SIGINT, and the close-time cancel warning and lost heartbeat, in the worker's
    process."""

    idempotent = True  # registered once per cluster: a second registration changes nothing

    def setup(self, worker=None) -> None:
        # a worker process runs its event loop, and so this, in its main thread; a worker
        # in a thread of another process (LocalCluster(processes=False)) cannot set signals
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        for name, unsaid in ((STATE_MACHINE_LOGGER, _not_a_closing_cancel),
                             (WORKER_LOGGER, _not_a_lost_heartbeat)):
            logger = logging.getLogger(name)
            if unsaid not in logger.filters:
                logger.addFilter(unsaid)

