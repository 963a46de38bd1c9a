"""The ``bind()`` shim that keeps a launched job's listening sockets where they belong.

Open MPI 5's daemons (``prterun`` on the launching machine, ``prted`` on the others) and its
ranks' TCP transport bind their listeners to the wildcard address (``0.0.0.0`` and ``[::]``)
whatever the settings: PRRTE 3 drops the loopback interface from its interface list whenever
another one exists, and the interface settings (``oob_tcp_if_include``, ``btl_tcp_if_include``)
only choose the addresses that are advertised and used, not the ones that listen.
docs/failures.md ("Network exposure") lists every setting tried.

So the launcher preloads a tiny shared library (``LD_PRELOAD``) whose ``bind()`` rewrites a
wildcard address; an address a process names passes unchanged. ``MODE_VARIABLE`` says how,
read once when the library loads:

* ``loopback``: a single-machine job, loaded into ``prterun`` only. The ranks reach it
  through PMIx (on 127.0.0.1 already) and talk over shared memory, so ``prterun``'s
  out-of-band listener goes to ``127.0.0.1``/``::1``. Inside ``prterun`` it gives the user's
  own ``LD_PRELOAD`` back (the ranks inherit ``prterun``'s environment), so the ranks and the
  user's code never load it.
* ``net:LIST``: a multi-machine job, LIST being the networks the user named (``--iface``:
  interface names and CIDR networks, comma-separated, as Open MPI takes them). Loaded into
  every daemon and, until MPI is initialised, every rank (``remote`` carries it to the
  other machines): a wildcard bind goes to this machine's first address on a named network
  (IPv6 link-local addresses excepted), or to loopback when the machine has none of that
  family there. Each bind reads the variable again, so a rank ends the rewriting for the
  user's own code by removing it (``release_environment``).

It is compiled once per machine with the C compiler (``cc``; the same toolchain that built
``minitorch_dist._C``) into the user's cache folder. ``bind_shim()`` returns
``(path, None)`` or ``(None, reason)``; ``preload_environment`` adds it to an environment.
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

__all__ = ["SHIM_SOURCE", "SAVED_PRELOAD", "MODE_VARIABLE", "bind_shim", "preload_environment",
           "release_environment"]

SAVED_PRELOAD = "MINITORCH_DIST_SAVED_LD_PRELOAD"
MODE_VARIABLE = "MINITORCH_DIST_BIND"

# Only the wildcard address is rewritten: a process that names an address gets that one.
SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MODE_VARIABLE "MINITORCH_DIST_BIND"
#define SAVED_VARIABLE "MINITORCH_DIST_SAVED_LD_PRELOAD"

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static char mode[1024];     /* "", "loopback" or "net:LIST", from the environment at load */

/* Whether ADDRESS (of interface NAME) is on one of LIST's networks: an interface name, or
   a CIDR network "10.0.0.0/8" / "fd00::/8" of the address's family. */
static int on_listed_network(const char *list, const char *name, const struct sockaddr *address)
{
    char copy[sizeof mode];
    char *save = NULL;
    strncpy(copy, list, sizeof copy - 1);
    copy[sizeof copy - 1] = '\0';
    for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(entry, '/');
        if (slash == NULL) {
            if (strcmp(entry, name) == 0) return 1;
            continue;
        }
        *slash = '\0';
        int family = address->sa_family, size = family == AF_INET ? 4 : 16;
        const unsigned char *own = family == AF_INET
            ? (const unsigned char *)&((const struct sockaddr_in *)address)->sin_addr
            : (const unsigned char *)&((const struct sockaddr_in6 *)address)->sin6_addr;
        unsigned char network[16];
        char *end = NULL;
        long bits = strtol(slash + 1, &end, 10);
        if (inet_pton(family, entry, network) != 1 || end == slash + 1 || *end != '\0'
                || bits < 0 || bits > size * 8) {
            continue;
        }
        int whole = (int)bits / 8, rest = (int)bits % 8;
        if (memcmp(network, own, whole) != 0) continue;
        if (rest && ((network[whole] ^ own[whole]) & (0xff << (8 - rest)) & 0xff)) continue;
        return 1;
    }
    return 0;
}

/* Say once that the listed networks hold several addresses of one family here: one
   listener takes the first, and a peer told another address could not connect. */
static void warn_several(int family, const struct sockaddr_storage *chosen)
{
    static int warned[2];
    char text[INET6_ADDRSTRLEN] = "?";
    if (warned[family == AF_INET6]++) return;
    const void *raw = family == AF_INET
        ? (const void *)&((const struct sockaddr_in *)chosen)->sin_addr
        : (const void *)&((const struct sockaddr_in6 *)chosen)->sin6_addr;
    inet_ntop(family, raw, text, sizeof text);
    fprintf(stderr, "minitorch_dist: warning: --iface %s matches more than one %s address "
            "on this machine; Open MPI listens on %s only, and a peer that uses another one "
            "cannot connect: name networks that hold one address of each machine (an "
            "interface with a single address, or a narrower CIDR network)\n", mode + 4,
            family == AF_INET ? "IPv4" : "IPv6", text);
}

/* This machine's first up address of FAMILY on a listed network, into OUT; 0 if none. */
static int listed_address(int family, struct sockaddr_storage *out)
{
    struct ifaddrs *all = NULL;
    int found = 0;
    if (getifaddrs(&all) != 0) return 0;
    for (struct ifaddrs *each = all; each != NULL && found < 2; each = each->ifa_next) {
        if (each->ifa_addr == NULL || each->ifa_addr->sa_family != family
                || !(each->ifa_flags & IFF_UP)) {
            continue;
        }
        if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(
                &((const struct sockaddr_in6 *)each->ifa_addr)->sin6_addr)) {
            continue;     /* needs a scope id, and is not what peers are told to use */
        }
        if (on_listed_network(mode + 4, each->ifa_name, each->ifa_addr)) {
            if (!found) {
                memcpy(out, each->ifa_addr, family == AF_INET ? sizeof(struct sockaddr_in)
                                                              : sizeof(struct sockaddr_in6));
            }
            found++;
        }
    }
    freeifaddrs(all);
    if (found > 1) warn_several(family, out);
    return found > 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static bind_fn real_bind = NULL;
    if (real_bind == NULL) {
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
        if (real_bind == NULL) { errno = ENOSYS; return -1; }
    }
    int net = strncmp(mode, "net:", 4) == 0;
    if (mode[0] == '\0' || (net && getenv(MODE_VARIABLE) == NULL) || addr == NULL) {
        return real_bind(fd, addr, len);
    }
    struct sockaddr_storage found;
    if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in copy;
        memcpy(&copy, addr, sizeof copy);
        if (copy.sin_addr.s_addr == htonl(INADDR_ANY)) {
            if (net && listed_address(AF_INET, &found)) {
                copy.sin_addr = ((struct sockaddr_in *)&found)->sin_addr;
            } else {
                copy.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            }
            return real_bind(fd, (const struct sockaddr *)&copy, sizeof copy);
        }
    } else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 copy;
        memcpy(&copy, addr, sizeof copy);
        if (memcmp(&copy.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            if (net && listed_address(AF_INET6, &found)) {
                copy.sin6_addr = ((struct sockaddr_in6 *)&found)->sin6_addr;
            } else {
                copy.sin6_addr = in6addr_loopback;
            }
            return real_bind(fd, (const struct sockaddr *)&copy, sizeof copy);
        }
    }
    return real_bind(fd, addr, len);
}

/* Read the mode once. In loopback mode, inside the daemon that starts the ranks, give
   LD_PRELOAD back its value from before the launcher added this library (the ranks inherit
   prterun's environment) and drop this library's variables. */
__attribute__((constructor)) static void read_mode(void)
{
    extern char *program_invocation_short_name;
    const char *value = getenv(MODE_VARIABLE);
    if (value == NULL) return;
    strncpy(mode, value, sizeof mode - 1);
    if (strcmp(mode, "loopback") != 0 || (strcmp(program_invocation_short_name, "prterun") != 0
                                          && strcmp(program_invocation_short_name, "prte") != 0)) {
        return;
    }
    const char *saved = getenv(SAVED_VARIABLE);
    if (saved == NULL || saved[0] == '\0') {
        unsetenv("LD_PRELOAD");
    } else {
        setenv("LD_PRELOAD", saved, 1);
    }
    unsetenv(SAVED_VARIABLE);
    unsetenv(MODE_VARIABLE);
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
def bind_shim():
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
    path = os.path.join(folder, f"bind_shim-{digest}.so")
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


def preload_environment(env, shim, mode="loopback"):
    """``env`` with ``shim`` first in ``LD_PRELOAD`` and ``MODE_VARIABLE`` set to ``mode``;
    the previous ``LD_PRELOAD`` is kept in ``SAVED_PRELOAD`` for ``prterun`` (loopback) or
    the ranks (``release_environment``) to restore.

    >>> e = preload_environment({"LD_PRELOAD": "/x.so"}, "/s.so")
    >>> e["LD_PRELOAD"], e[SAVED_PRELOAD], e[MODE_VARIABLE]
    ('/s.so /x.so', '/x.so', 'loopback')
    """
    env = dict(env)
    previous = env.get("LD_PRELOAD", "")
    env[SAVED_PRELOAD] = previous
    env["LD_PRELOAD"] = f"{shim} {previous}".strip()
    env[MODE_VARIABLE] = mode
    return env


def release_environment(env):
    """Undo ``preload_environment`` in ``env`` (a dict or ``os.environ``), in place: the
    user's ``LD_PRELOAD`` back (or none), the shim's variables gone. In a process that loaded
    the shim in ``net:`` mode this also ends its rewriting (each bind reads the variable).

    >>> e = {"LD_PRELOAD": "/s.so /x.so", SAVED_PRELOAD: "/x.so", MODE_VARIABLE: "net:eth0"}
    >>> release_environment(e)
    {'LD_PRELOAD': '/x.so'}
    >>> release_environment({"LD_PRELOAD": "/jemalloc.so", MODE_VARIABLE: "net:eth0"})
    {'LD_PRELOAD': '/jemalloc.so'}
    """
    env.pop(MODE_VARIABLE, None)
    if SAVED_PRELOAD not in env:      # the shim was never preloaded: LD_PRELOAD is the user's
        return env
    saved = env.pop(SAVED_PRELOAD)
    if saved:
        env["LD_PRELOAD"] = saved
    else:
        env.pop("LD_PRELOAD", None)
    return env
