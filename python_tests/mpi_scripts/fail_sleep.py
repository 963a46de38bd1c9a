"""Each rank writes its pid to <folder>/pid.<rank> and sleeps (a job for the signal tests).

    python fail_sleep.py FOLDER [SECONDS]
"""
import os
import sys
import time

folder = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
with open(os.path.join(folder, f"pid.{rank}"), "w") as handle:
    handle.write(str(os.getpid()))
time.sleep(seconds)
