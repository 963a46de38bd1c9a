"""Checkpoints: save a network's parameters to a file and load them back.

The file format (version 1) is a ZIP archive of uncompressed members, so ``numpy.load``
opens it like an ``.npz``:

* ``<name>.npy``: one NumPy ``.npy`` array per tensor, named after the parameter
  (``fc1.weight.npy``; a name that cannot be a ZIP member name gets ``__entry_<i>__.npy``);
* ``__checkpoint__.json``: the manifest, ``{"format": "minitorch_dist.checkpoint",
  "version": 1, "entries": [...]}`` with, per entry, the exact name, member, dtype, shape,
  ``requires_grad`` and the CRC-32 of the array's bytes (C order), checked on load.
  String values from ``append_dict`` are stored in the manifest itself.

Writing is atomic: the archive goes to a temporary file in the same directory
(``.<name>.<pid>.<random>.tmp``), is flushed and fsynced, then renamed over the final name
with ``os.replace``. An error in the middle leaves the previous file untouched and removes
the temporary file; a process killed in the middle (SIGKILL) cannot, so the next save of the
same file removes temporary files whose writing process is gone. Loading never unpickles
anything (``allow_pickle=False``), and any corruption (a bad ZIP header, a truncated member,
a wrong checksum or manifest) is a ``ValueError`` naming the file.

Exact resume: ``ModelCheckpoint`` adds a ``__train_state__`` string entry (epoch, step, the
framework's random state, the dataset's epoch counter). ``restore_train_state(checkpoint,
dataset)`` puts it back; ``Model.train(epochs, dataset, initial_epoch=state["epoch"])`` then
equals an uninterrupted run bit for bit, shuffles and dropout masks included.
"""
import json
import os
import re
import threading
import uuid
import zipfile
import zlib
from collections import OrderedDict

import numpy as np

from ..backend import dtypes, get_device
from ..backend.arrays import contiguous
from ..extension import extension
from ..nn.cell import Cell
from ..nn.parameter import Parameter
from ..tensor import Tensor
from .checkpoint_identity import attach_origins
from .train_state import TRAIN_STATE, restore_from_entries, train_state_json

__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net", "wait_async_saves",
           "checkpoint_entries", "restore_train_state", "train_state_json", "TRAIN_STATE"]

FORMAT = "minitorch_dist.checkpoint"
VERSION = 1
MANIFEST = "__checkpoint__.json"


# ---- saving ---------------------------------------------------------------------------------
def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False,
                    append_dict=None, choice_func=None):
    """Save ``save_obj`` to ``ckpt_file_name`` (".ckpt" is appended when missing).

    ``save_obj`` is a Cell (every parameter, trainable or not: a ``TrainOneStepCell`` brings
    its optimizer's step counter and moments), a list of ``{"name": str, "data": Tensor}``
    dicts, a list of Parameters, or a ``{name: Tensor}`` dict. ``append_dict`` adds extra
    values (numbers, strings, Tensors), e.g. ``{"epoch_num": 3}``. ``choice_func(name)``
    returning False leaves a parameter out. ``async_save=True`` copies the values to host
    now and writes the file in a background thread (see :func:`wait_async_saves`).
    ``integrated_save`` matters for operator-sharded parameters only: True (the default, as
    in MindSpore) gathers each one over the ranks that share it and saves the whole tensor,
    so every rank of the sharded group must call ``save_checkpoint`` (it is a collective);
    False saves this rank's slices with their layouts (join the ranks' files with
    ``merge_sharded_checkpoints``). ``load_param_into_net`` gives a sliced parameter its
    block of a whole tensor.

    >>> import os, tempfile
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> from minitorch_dist.train import save_checkpoint, load_checkpoint
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "dense.ckpt")
    >>> save_checkpoint(nn.Dense(3, 2), path)
    >>> {name: p.shape for name, p in load_checkpoint(path).items()}
    {'weight': (2, 3), 'bias': (2,)}
    >>> scratch.cleanup()
    """
    if not isinstance(integrated_save, bool):
        raise TypeError(f"save_checkpoint: integrated_save must be True or False, got "
                        f"{integrated_save!r}")
    path = _checkpoint_path(ckpt_file_name)
    entries = _entries_from(save_obj, choice_func)
    if integrated_save:
        entries = extension().integrated_entries(entries)    # sliced parameters made whole
    entries += extension().checkpoint_entries(entries)   # e.g. how sliced parameters were cut
    entries += _append_entries(append_dict, {name for name, _ in entries})
    # host copies now, so that training may go on while an async save writes them
    snapshot = [(name, _host_value(value, copy=async_save)) for name, value in entries]
    if async_save:
        _start_async(path, snapshot)
    else:
        wait_async_saves()   # keep file writes in call order
        _write_atomic(path, snapshot)


def checkpoint_entries(cell):
    """``(name, Parameter)`` for every parameter of ``cell`` as checkpoints name them.

    The name is the parameter's own name; a second, different parameter with the same
    name (e.g. two optimizers' ``global_step``) takes its attribute path instead, spelled in
    full even through wrappers that leave their attribute names out of parameter names
    (``optimizer_d.global_step`` in Wide&Deep's ``TrainStepWrap``).
    """
    taken, out = set(), []
    full_paths = None
    for path, param in cell.parameters_and_names():
        if _held_elsewhere(param):
            continue
        name = param.name or path
        if name in taken:
            name = path
        if name in taken:
            full_paths = full_paths or _attribute_paths(cell)
            name = full_paths.get(id(param), name)
        if name in taken:
            raise ValueError(f"two different parameters are both named {name!r}; give them "
                             "distinct names before saving or loading a checkpoint")
        taken.add(name)
        out.append((name, param))
    return out


def _held_elsewhere(param):
    """A parameter another pipeline stage's process holds (released here), or an optimizer
    state of one: this process never updates it, so its zeros are nobody's values."""
    return param.released or getattr(getattr(param, "slot_of", None), "released", False)


def _attribute_paths(cell, prefix="", found=None):
    """id(parameter) -> its first attribute path from ``cell``, every cell's name included."""
    found = {} if found is None else found
    for name, param in cell._params.items():
        found.setdefault(id(param), f"{prefix}{name}")
    for name, child in cell._cells.items():
        _attribute_paths(child, f"{prefix}{name}.", found)
    return found


def _checkpoint_path(ckpt_file_name):
    if isinstance(ckpt_file_name, os.PathLike):
        ckpt_file_name = os.fspath(ckpt_file_name)
    if not isinstance(ckpt_file_name, str) or not ckpt_file_name:
        raise TypeError(f"save_checkpoint: ckpt_file_name must be a non-empty path string, "
                        f"got {ckpt_file_name!r}")
    if not ckpt_file_name.endswith(".ckpt"):
        ckpt_file_name += ".ckpt"
    path = os.path.abspath(ckpt_file_name)
    if os.path.isdir(path):
        raise ValueError(f"save_checkpoint: {path!r} is a directory, not a file name")
    return path


def _entries_from(save_obj, choice_func):
    if isinstance(save_obj, Cell):
        entries = checkpoint_entries(save_obj)
    elif isinstance(save_obj, dict):
        entries = list(save_obj.items())
    elif isinstance(save_obj, (list, tuple)):
        entries = [_list_item(item, k) for k, item in enumerate(save_obj)]
    else:
        raise TypeError("save_checkpoint: save_obj must be a Cell, a list of {'name', 'data'} "
                        f"dicts or Parameters, or a dict of name -> Tensor; got {type(save_obj).__name__}")
    names = set()
    for name, _ in entries:
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_checkpoint: parameter names must be non-empty strings, got {name!r}")
        if name in names:
            raise ValueError(f"save_checkpoint: the name {name!r} appears twice")
        names.add(name)
    if choice_func is not None:
        entries = [(name, value) for name, value in entries if choice_func(name)]
    return entries


def _list_item(item, k):
    if isinstance(item, Parameter):
        if not item.name:
            raise ValueError(f"save_checkpoint: Parameter {k} of the list has no name")
        return item.name, item
    if isinstance(item, dict) and "name" in item and "data" in item:
        return item["name"], item["data"]
    raise TypeError(f"save_checkpoint: list item {k} must be a Parameter or a dict with keys "
                    f"'name' and 'data', got {type(item).__name__}")


def _append_entries(append_dict, taken):
    if append_dict is None:
        return []
    if not isinstance(append_dict, dict):
        raise TypeError(f"save_checkpoint: append_dict must be a dict, got {type(append_dict).__name__}")
    out = []
    for name, value in append_dict.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"save_checkpoint: append_dict keys must be non-empty strings, got {name!r}")
        if name in taken:
            raise ValueError(f"save_checkpoint: append_dict key {name!r} is also a parameter name")
        if isinstance(value, bool):
            value = np.array(value)
        elif isinstance(value, (int, np.integer)):
            value = np.array(value, np.int64)
        elif isinstance(value, (float, np.floating)):
            value = np.array(value, np.float32)
        elif not isinstance(value, (str, Tensor, np.ndarray)):
            raise TypeError(f"save_checkpoint: append_dict[{name!r}] must be a number, a string, "
                            f"a Tensor or an array, got {type(value).__name__}")
        out.append((name, value))
    return out


def _host_value(value, copy):
    """(C-contiguous host array or str, requires_grad) for one entry."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, Tensor):
        if value.deferred_init is not None:     # no_init_parameters: drawn as at first use
            value.init_data()
        array = value.asnumpy() if not value.device.is_host or copy else value.data
        return contiguous(array), bool(value.requires_grad)
    if isinstance(value, np.ndarray):
        if value.dtype.newbyteorder("=") not in dtypes.SUPPORTED:
            raise TypeError(f"save_checkpoint: arrays of dtype {value.dtype} cannot be saved; "
                            f"supported dtypes are {[str(d) for d in dtypes.SUPPORTED]}")
        return np.array(value, order="C", copy=True) if copy else contiguous(value), False
    raise TypeError(f"save_checkpoint: values must be Tensors or arrays, got {type(value).__name__}")


def _member_names(names):
    """One ZIP member per entry: ``<name>.npy`` where that is a clean, unique member name."""
    used, members = {MANIFEST}, []
    for i, name in enumerate(names):
        member = f"{name}.npy"
        if "\x00" in name or name.startswith("/") or "\\" in name or member in used \
                or not _utf8(name):
            member = f"__entry_{i}__.npy"
            while member in used:
                member = f"_{member}"
        used.add(member)
        members.append(member)
    return members


def _utf8(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _write_entry(archive, member, array):
    """Write one array as a ``.npy`` member (a seam for tests that make writes fail)."""
    with archive.open(member, "w", force_zip64=True) as out:
        np.lib.format.write_array(out, array, allow_pickle=False)


def _write_archive(fileobj, snapshot):
    names = [name for name, _ in snapshot]
    entries = []
    with zipfile.ZipFile(fileobj, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for (name, (value, requires_grad)), member in zip(snapshot, _member_names(names)):
            if isinstance(value, str):
                entries.append({"name": name, "kind": "string", "value": value})
                continue
            _write_entry(archive, member, value)
            entries.append({"name": name, "kind": "tensor", "member": member,
                            "dtype": value.dtype.str, "shape": list(value.shape),
                            "requires_grad": requires_grad, "crc32": zlib.crc32(value)})
        manifest = {"format": FORMAT, "version": VERSION, "entries": entries}
        archive.writestr(MANIFEST, json.dumps(manifest, indent=1))


def _write_atomic(path, snapshot):
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = os.path.join(directory,
                       f".{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    # O_EXCL: never clobber anything; mode 0o666 lets the umask decide, like open()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    _writing.add(os.path.basename(tmp))
    try:
        with os.fdopen(fd, "wb") as out:
            _write_archive(out, snapshot)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    finally:
        _writing.discard(os.path.basename(tmp))
    _fsync_directory(directory)


def remove_stale_temporaries(path):
    """Remove temporary files of earlier saves of ``path`` whose writing process is gone
    (killed in the middle of a save); returns the paths removed. Temporary files of a
    process that still runs (a save in progress) are left alone."""
    directory, base = os.path.split(path)
    pattern = re.compile(r"^\." + re.escape(base) + r"\.(?:(\d+)\.)?[0-9a-f]{12}\.tmp$")
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = pattern.match(name)
        if match is None:
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid is not None and pid != os.getpid() and _process_exists(pid):
            continue
        if pid == os.getpid() and name in _writing:
            continue
        try:
            os.remove(os.path.join(directory, name))
            removed.append(os.path.join(directory, name))
        except OSError:
            pass
    return removed


def _process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_directory(directory):
    """Make the rename itself durable (POSIX); best effort elsewhere."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- asynchronous saves ---------------------------------------------------------------------
_async = {"thread": None, "error": None}
_writing = set()     # temporary file names this process is writing now


def _start_async(path, snapshot):
    wait_async_saves()

    def write():
        try:
            _write_atomic(path, snapshot)
        except BaseException as err:   # reported by the next wait_async_saves()
            _async["error"] = (path, err)

    thread = threading.Thread(target=write, name="save_checkpoint", daemon=False)
    _async["thread"] = thread
    thread.start()


def wait_async_saves():
    """Block until a pending ``save_checkpoint(..., async_save=True)`` has written its file;
    re-raises (as RuntimeError) an error that happened in the background."""
    thread = _async["thread"]
    if thread is not None:
        thread.join()
        _async["thread"] = None
    failure, _async["error"] = _async["error"], None
    if failure is not None:
        path, err = failure
        raise RuntimeError(f"asynchronous save of checkpoint {path!r} failed: {err}") from err


# ---- loading --------------------------------------------------------------------------------
class _CheckpointError(ValueError):
    """A ValueError this module raised itself (already names the file)."""


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    specify_prefix=None, choice_func=None):
    """Read a checkpoint into an ordered dict ``name -> Parameter`` (strings stay ``str``).

    With ``net``, the values are also copied into its parameters (:func:`load_param_into_net`).
    ``filter_prefix`` (a string or a list of them) skips names starting with it,
    ``specify_prefix`` keeps only names starting with it, ``choice_func(name)`` keeps names
    for which it returns True. A missing, truncated or corrupt file (bad ZIP, bad checksum,
    wrong manifest) raises ValueError naming the file and the problem.
    """
    path = os.fspath(ckpt_file_name) if isinstance(ckpt_file_name, os.PathLike) else ckpt_file_name
    if not isinstance(path, str) or not path:
        raise TypeError(f"load_checkpoint: ckpt_file_name must be a path string, got {ckpt_file_name!r}")
    if net is not None and not isinstance(net, Cell):
        raise TypeError(f"load_checkpoint: net must be a Cell, got {type(net).__name__}")
    wanted = _name_filter(filter_prefix, specify_prefix, choice_func)
    wait_async_saves()
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise _CheckpointError(f"load_checkpoint: checkpoint file {path!r} {what}")
    try:
        with zipfile.ZipFile(path, "r") as archive:
            entries = _read_manifest(archive, path)
            params = OrderedDict()
            for entry in entries:
                if wanted(entry["name"]):
                    params[entry["name"]] = _read_entry(archive, entry, path)
            attach_origins(params, entries, path)     # whose slices (checkpoint_identity)
    except zipfile.BadZipFile as err:
        raise _CheckpointError(f"load_checkpoint: {path!r} is corrupt or truncated (not a valid ZIP "
                         f"archive: {err})") from None
    except OSError as err:
        raise _CheckpointError(f"load_checkpoint: cannot read {path!r}: {err}") from None
    except _CheckpointError:
        raise
    except Exception as err:   # a damaged header trips the ZIP reader in many ways
        raise _CheckpointError(f"load_checkpoint: {path!r} is corrupt ({type(err).__name__} while "
                         f"reading it: {err})") from None
    if net is not None:
        load_param_into_net(net, params, strict_load)
    return params


def _name_filter(filter_prefix, specify_prefix, choice_func):
    skip = _prefixes(filter_prefix, "filter_prefix")
    keep = _prefixes(specify_prefix, "specify_prefix")
    if choice_func is not None and not callable(choice_func):
        raise TypeError(f"load_checkpoint: choice_func must be callable, got {type(choice_func).__name__}")

    def wanted(name):
        if skip and name.startswith(skip):
            return False
        if keep and not name.startswith(keep):
            return False
        return choice_func is None or bool(choice_func(name))
    return wanted


def _prefixes(value, what):
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(p, str) and p for p in items):
        raise TypeError(f"load_checkpoint: {what} must be a non-empty string or a list of them, "
                        f"got {value!r}")
    return tuple(items)


def _read_manifest(archive, path):
    try:
        raw = archive.read(MANIFEST)
    except KeyError:
        raise _CheckpointError(f"load_checkpoint: {path!r} has no {MANIFEST} manifest: it is not a "
                         "checkpoint written by minitorch_dist.save_checkpoint") from None
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _CheckpointError(f"load_checkpoint: the manifest of {path!r} is corrupt: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _CheckpointError(f"load_checkpoint: {path!r} is not a {FORMAT} file (manifest format "
                         f"{manifest.get('format') if isinstance(manifest, dict) else None!r})")
    version = manifest.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise _CheckpointError(f"load_checkpoint: {path!r} has format version {version!r}; this "
                         f"minitorch_dist reads versions 1 to {VERSION}")
    entries = manifest.get("entries")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "name" in e for e in entries):
        raise _CheckpointError(f"load_checkpoint: the manifest of {path!r} has no valid entry list")
    return entries


def _read_entry(archive, entry, path):
    name = entry["name"]
    if entry.get("kind") == "string":
        return entry.get("value")
    try:
        with archive.open(entry["member"]) as member:
            array = np.lib.format.read_array(member, allow_pickle=False)
    except KeyError:
        raise _CheckpointError(f"load_checkpoint: {path!r} lacks the data of parameter {name!r} "
                         f"(member {entry.get('member')!r})") from None
    except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise _CheckpointError(f"load_checkpoint: the data of parameter {name!r} in {path!r} is "
                         f"corrupt: {err}") from None
    if array.dtype.str != entry.get("dtype") or list(array.shape) != entry.get("shape"):
        raise _CheckpointError(f"load_checkpoint: parameter {name!r} in {path!r} has dtype {array.dtype} "
                         f"and shape {array.shape}, but the manifest says {entry.get('dtype')} "
                         f"and {tuple(entry.get('shape') or ())}")
    if zlib.crc32(contiguous(array)) != entry.get("crc32"):
        raise _CheckpointError(f"load_checkpoint: checksum mismatch for parameter {name!r} in {path!r}: "
                         "the file is corrupt")
    if not array.dtype.isnative:   # written on a machine of the other byte order
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype not in dtypes.SUPPORTED:
        raise _CheckpointError(f"load_checkpoint: parameter {name!r} in {path!r} has dtype {array.dtype}, "
                         f"which minitorch_dist does not support ({[str(d) for d in dtypes.SUPPORTED]})")
    return Parameter(Tensor._make(array, get_device("CPU")), name=name,
                     requires_grad=bool(entry.get("requires_grad", True)))


# ---- into a network -------------------------------------------------------------------------
def load_param_into_net(net, parameter_dict, strict_load=False):
    """Copy the values of ``parameter_dict`` (name -> Tensor/Parameter) into ``net``'s
    parameters of the same names, in place (each keeps its device).

    Returns ``(param_not_load, ckpt_not_load)``: the names of ``net`` parameters the dict
    lacks, and the dict names ``net`` has no parameter for. A shape or dtype mismatch is a
    ValueError naming the parameter and both shapes/dtypes; with ``strict_load=True`` so is
    any parameter of ``net`` missing from the dict. Everything is checked before anything
    is copied, so a failed load leaves the network unchanged. A parameter sliced across ranks
    (operator sharding) takes its block of a whole value.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> from minitorch_dist.train import load_param_into_net
    >>> net = nn.Dense(2, 1, weight_init="zeros")
    >>> load_param_into_net(net, {"weight": ms.Tensor([[1.0, 2.0]]), "step": ms.Tensor(3)})
    (['bias'], ['step'])
    >>> net.weight.asnumpy().tolist()
    [[1.0, 2.0]]
    """
    if not isinstance(net, Cell):
        raise TypeError(f"load_param_into_net: net must be a Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError("load_param_into_net: parameter_dict must be a dict of name -> Tensor, "
                        f"got {type(parameter_dict).__name__}")
    plan, param_not_load, used = [], [], set()
    for name, param in checkpoint_entries(net):
        if name not in parameter_dict:
            param_not_load.append(name)
            continue
        value = extension().local_value(param, _as_tensor(name, parameter_dict[name]))
        if value.shape != param.shape:
            raise ValueError(f"load_param_into_net: shape mismatch for parameter {name!r}: the "
                             f"network has {param.shape}, the checkpoint has {value.shape}")
        if value.dtype != param.dtype:
            raise ValueError(f"load_param_into_net: dtype mismatch for parameter {name!r}: the "
                             f"network has {param.dtype}, the checkpoint has {value.dtype} "
                             "(cast the checkpoint value or the network first)")
        plan.append((param, value))
        used.add(name)
    if strict_load and param_not_load:
        raise ValueError(f"load_param_into_net: strict_load=True but the checkpoint has no value "
                         f"for {len(param_not_load)} parameter(s) of the network: {param_not_load}")
    for param, value in plan:
        param.set_data(value)
    ckpt_not_load = [name for name in parameter_dict if name not in used]
    return param_not_load, ckpt_not_load


def _as_tensor(name, value):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return Tensor._make(value, get_device("CPU"))
    raise TypeError(f"load_param_into_net: the value for parameter {name!r} must be a Tensor or "
                    f"an array, got {type(value).__name__}")


def restore_train_state(checkpoint, dataset=None):
    """Put back the training state a ``ModelCheckpoint`` file carries, for an exact resume.

    ``checkpoint`` is a path or the dict ``load_checkpoint`` returned. Restores the
    framework's random state (dropout masks, later initializers) and, with ``dataset``, its
    epoch counter (its shuffle order). Returns ``{"epoch", "step", "step_in_epoch",
    "batch_num", "complete_epoch"}``: resume with ``Model.train(total_epochs, dataset,
    initial_epoch=state["epoch"])`` after ``load_checkpoint(path, train_network)``. A
    checkpoint written in the middle of an epoch resumes at the start of the next epoch
    (``complete_epoch`` is False): not bit-identical, and a ``UserWarning`` says so.
    A checkpoint without training state is a ValueError naming the file.
    (The state itself is read and written in ``train_state.py``.)
    """
    if not isinstance(checkpoint, (str, os.PathLike)):
        return restore_from_entries(checkpoint, dataset)
    entries = load_checkpoint(checkpoint, specify_prefix=TRAIN_STATE)
    return restore_from_entries(entries, dataset, where=checkpoint)
