"""SINGA's multiprocessing launch through ``minitorch_dist.run.spawn`` (issue 17 item 9).

    python fail_spawn.py MODE LOG_DIR

MODE "raise": every process raises the same ValueError (rank 0 first); "sleep": the
processes write pid files into LOG_DIR/pids and sleep (for Ctrl-C); "ok": they finish.
"""
import os
import sys
import time

from minitorch_dist.run import spawn


def train(rank, world_size, mode, folder):
    """One process of the job."""
    if mode == "raise":
        time.sleep(0.3 * rank)
        raise ValueError(f"bad batch size for {world_size} processes")
    if mode == "sleep":
        os.makedirs(os.path.join(folder, "pids"), exist_ok=True)
        with open(os.path.join(folder, "pids", str(rank)), "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(60)
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    mode, folder = sys.argv[1], sys.argv[2]
    sys.exit(spawn(train, 3, args=(mode, folder), log_dir=os.path.join(folder, "logs"),
                   timeout=60))
