"""Keeping a single-machine job's launcher daemon off the network.

Open MPI 5's ``mpiexec`` runs PRRTE's ``prterun``, whose out-of-band (OOB) listener binds
the wildcard address (``0.0.0.0`` and ``[::]``) whatever the settings: PRRTE 3 drops the
loopback interface from its interface list whenever another one exists (so
``oob_tcp_if_include lo`` ends the job with "No network interfaces were found for
out-of-band communications"), and its listener binds ``INADDR_ANY``/``in6addr_any`` even
when an interface is named (``oob_tcp_if_include``/``prte_if_include`` only choose the
addresses it advertises). docs/failures.md ("Network exposure") lists every setting tried.

A single-machine job needs no OOB peer at all (there are no remote daemons; the ranks reach
``prterun`` through PMIx, which already listens on 127.0.0.1 only), so the launcher preloads
a tiny shared library into ``prterun`` (``LD_PRELOAD``) whose ``bind()`` turns a wildcard
address into the loopback one (``127.0.0.1``/``::1``); other addresses pass unchanged.
Once inside ``prterun`` it restores the user's own ``LD_PRELOAD``, so the ranks (and the
user's code in them) never load it. It is compiled once per machine with the C compiler
(``cc``; the same toolchain that built ``minitorch_dist._C``) into the user's cache folder.

``loopback_shim()`` returns ``(path, None)`` or ``(None, reason)``; ``preload_environment``
adds it to an environment, and ``job_environment`` applies it to the jobs that need it.
"""
import functools
import hashlib
import os
import platform
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile

__all__ = ["SHIM_SOURCE", "SAVED_PRELOAD", "loopback_shim", "preload_environment",
           "exposure_warning", "job_environment"]

SAVED_PRELOAD = "MINITORCH_DIST_SAVED_LD_PRELOAD"

# Loaded into mpiexec's wrapper and prterun (the processes mpiexec execs); only prterun
# binds sockets. Only the wildcard address is rewritten: a process that names an address
# gets exactly that one.
SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static bind_fn real_bind = NULL;
    if (real_bind == NULL) {
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
        if (real_bind == NULL) { errno = ENOSYS; return -1; }
    }
    if (addr != NULL && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in copy;
        memcpy(&copy, addr, sizeof copy);
        if (copy.sin_addr.s_addr == htonl(INADDR_ANY)) {
            copy.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&copy, sizeof copy);
        }
    } else if (addr != NULL && addr->sa_family == AF_INET6
               && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 copy;
        memcpy(&copy, addr, sizeof copy);
        if (memcmp(&copy.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            copy.sin6_addr = in6addr_loopback;
            return real_bind(fd, (const struct sockaddr *)&copy, sizeof copy);
        }
    }
    return real_bind(fd, addr, len);
}

/* In the daemon that starts the ranks, give LD_PRELOAD back its value from before the
   launcher added this library: the ranks inherit prterun's environment. */
__attribute__((constructor)) static void restore_preload(void)
{
    extern char *program_invocation_short_name;
    const char *saved = getenv("MINITORCH_DIST_SAVED_LD_PRELOAD");
    if (saved == NULL || (strcmp(program_invocation_short_name, "prterun") != 0
                          && strcmp(program_invocation_short_name, "prte") != 0)) {
        return;
    }
    if (saved[0] == '\0') {
        unsetenv("LD_PRELOAD");
    } else {
        setenv("LD_PRELOAD", saved, 1);
    }
    unsetenv("MINITORCH_DIST_SAVED_LD_PRELOAD");
}
"""


def _cache_folder():
    """The user's cache folder for the shim: ``$XDG_CACHE_HOME`` or ``~/.cache``, else a
    private (0700, ours) folder in the temporary directory. None if neither is usable."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "minitorch_dist")
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    folder = os.path.join(tempfile.gettempdir(), f"minitorch_dist-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    # a shared temporary directory: someone else's folder (or a link) could hold a planted
    # library that prterun would load
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return None
    return folder


def _compiler():
    """The C compiler as an argument list (``$CC``, Python's build compiler, cc, gcc,
    clang), or None."""
    for spec in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc", "clang"):
        if spec:
            words = shlex.split(spec)
            if words and shutil.which(words[0]):
                return words
    return None


@functools.lru_cache(maxsize=None)
def loopback_shim():
    """``(path, None)`` to the compiled shim (built on first use), or ``(None, reason)``."""
    if not sys.platform.startswith("linux"):
        return None, f"LD_PRELOAD is Linux-only (this is {sys.platform})"
    compiler = _compiler()
    if compiler is None:
        return None, "no C compiler (cc) to build it"
    folder = _cache_folder()
    if folder is None:
        return None, "no writable cache folder to build it in"
    if any(c.isspace() or c == ":" for c in folder):    # LD_PRELOAD's separators
        return None, f"its cache folder {folder!r} has a space or a colon in its path"
    digest = hashlib.sha256((SHIM_SOURCE + platform.machine()).encode()).hexdigest()[:16]
    path = os.path.join(folder, f"loopback_bind-{digest}.so")
    if os.path.exists(path):
        return path, None
    handle, source = tempfile.mkstemp(suffix=".c", dir=folder)
    target = source[:-2] + ".so"
    try:
        with os.fdopen(handle, "w") as out:
            out.write(SHIM_SOURCE)
        result = subprocess.run(compiler + ["-O2", "-shared", "-fPIC", "-o", target, source,
                                            "-ldl"], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"{' '.join(compiler)} failed to build it: {last}"
        os.replace(target, path)          # atomic: a concurrent launch sees all or nothing
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"building it failed: {exc}"
    finally:
        for leftover in (source, target):
            try:
                os.remove(leftover)
            except OSError:
                pass
    return path, None


def preload_environment(env, shim):
    """``env`` with ``shim`` first in ``LD_PRELOAD``; the previous value is kept in
    ``SAVED_PRELOAD`` for the shim to restore inside prterun.

    >>> e = preload_environment({"LD_PRELOAD": "/x.so"}, "/s.so")
    >>> e["LD_PRELOAD"], e[SAVED_PRELOAD]
    ('/s.so /x.so', '/x.so')
    """
    env = dict(env)
    previous = env.get("LD_PRELOAD", "")
    env[SAVED_PRELOAD] = previous
    env["LD_PRELOAD"] = f"{shim} {previous}".strip()
    return env


def exposure_warning(reason):
    """The one line printed when the shim is unavailable (the job still runs)."""
    return ("minitorch_dist.run: warning: Open MPI's launcher daemon (prterun) will listen on "
            f"all network interfaces for this job: the loopback shim is unavailable ({reason}). "
            "See docs/failures.md, 'Network exposure'.")


def job_environment(env, flavor, remote, warn=True):
    """mpiexec's environment ``env``: for a single-machine (not ``remote``) Open MPI job,
    with the loopback shim preloaded into ``prterun`` (its out-of-band listener then binds
    127.0.0.1/::1 instead of every interface); other jobs get ``env`` unchanged. Without the shim the job still runs, after one warning on
    stderr (``warn``) saying so and why."""
    if flavor != "openmpi" or remote:
        return env
    shim, reason = loopback_shim()
    if shim is None:
        if warn:
            print(exposure_warning(reason), file=sys.stderr, flush=True)
        return env
    return preload_environment(env, shim)
