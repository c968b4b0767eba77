"""The log formats ``read_logs`` reads and the metric names it takes as lower-is-better,
apart from ``fastsim.replay.logs``: ``fastsim replay``'s parser lists them, and the
reader's imports (polars, numba) would slow its ``--help`` and usage errors."""

FORMATS = ("csv", "tsv", "jsonl", "parquet", "trainer_state")
# A metric whose name ends with one of these is lower-is-better unless told otherwise.
LOWER_IS_BETTER_SUFFIXES = ("loss", "perplexity", "ppl", "error", "wer", "cer")
