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


def _not_a_closing_cancel(record: logging.LogRecord) -> bool:
    return not (record.levelno == logging.WARNING
                and record.getMessage().endswith("ended with CancelledError"))


class SweepWorkerPlugin(WorkerPlugin):
    """Ignore SIGINT and the close-time cancel warning in the worker's process."""

    idempotent = True  # registered once per cluster: a second registration changes nothing

    def setup(self, worker=None) -> None:
        # a worker process runs its event loop, and so this, in its main thread; a worker
        # in a thread of another process (LocalCluster(processes=False)) cannot set signals
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        logger = logging.getLogger(STATE_MACHINE_LOGGER)
        if _not_a_closing_cancel not in logger.filters:
            logger.addFilter(_not_a_closing_cancel)

