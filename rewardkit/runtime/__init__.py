"""Running scorers over files: it sits above the scorers and below the CLI.

- ``inputs``: reading rollouts (JSONL, Parquet, datasets; grouped, flat, chat, verl and TRL rows);
- ``jobs``: resumable scoring jobs (``score_file``) and their summaries;
- ``output``: ``JobOutput``, the one owner of a job's output file (checks, manifest, lock, appends, merge);
- ``ray_runner``: the same jobs sharded over a Ray cluster.
"""
