"""What a test reads back from an entry program: its per-step losses, its evaluation values
and its parameters, saved to ``config.result_file`` (an ``.npz``; nothing when empty).

Parameters are saved by name as each rank holds them (a sliced table: this rank's slice),
with the placement report (``ms.placement_report()``: where each primitive instance and each
optimizer update ran).
"""
import json

import numpy as np

import minitorch_dist as ms


def save_result(config, train_net, loss_callback, eval_callback, rank=0):
    """Write the result of one rank to ``config.result_file`` (``{rank}`` is replaced)."""
    if not config.result_file:
        return None
    path = config.result_file.replace("{rank}", str(rank))
    params = train_net.network.trainable_params()
    arrays = {f"param/{i:03d}/{p.name}": p.asnumpy() for i, p in enumerate(params)}
    arrays["losses"] = np.array([row[2:] for row in loss_callback.losses], dtype=np.float64)
    arrays["eval_values"] = np.array([np.nan if v is None else v for v in eval_callback.eval_values])
    arrays["optimizer_w"] = np.array(json.dumps([p.name for p in train_net.optimizer_w.parameters]))
    arrays["optimizer_d"] = np.array(json.dumps([p.name for p in train_net.optimizer_d.parameters]))
    report = ms.placement_report()
    placement = {"ops": [[row["display"], row["device"]] for row in report],
                 "updates": [[row["name"], row["device"]] for row in report.updates],
                 "params": [[p.name, str(p.device)] for p in params]}
    arrays["placement"] = np.array(json.dumps(placement))
    np.savez(path, **arrays)
    return path


def load_result(path):
    """The saved result as a dict: ``losses`` (steps, 2), ``eval_values``, ``params`` by name,
    ``param_list`` ((name, value) in the network's order),
    ``optimizer_w`` / ``optimizer_d`` (parameter names), ``placement`` ({"ops": [[display,
    device], ...], "updates": [[name, device], ...], "params": [[name, device], ...]})."""
    with np.load(path) as data:
        keys = sorted(k for k in data.files if k.startswith("param/"))
        return {"losses": data["losses"], "eval_values": data["eval_values"],
                "param_list": [(k[len("param/000/"):], data[k]) for k in keys],
                "params": {k[len("param/000/"):]: data[k] for k in keys},
                "optimizer_w": json.loads(str(data["optimizer_w"])),
                "optimizer_d": json.loads(str(data["optimizer_d"])),
                "placement": json.loads(str(data["placement"]))}
