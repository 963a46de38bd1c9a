"""Reading the listening TCP sockets of a machine (or of a network namespace) from
``/proc/net/tcp`` and ``/proc/net/tcp6``, for the network-exposure tests."""
import ipaddress

__all__ = ["proc_address", "parse_listeners", "listeners", "is_loopback"]

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def proc_address(hex_address):
    """An address of /proc/net/tcp{,6} ("0100007F" or 32 hex digits in 32-bit words in host
    (little-endian) order) as an ``ipaddress`` object."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])
    return ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))


def parse_listeners(text):
    """``{socket inode: (address, port)}`` of the LISTEN rows of the tables' text (their
    header lines are skipped)."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 9 and fields[3] == "0A" and ":" in fields[1]:
            host, port = fields[1].split(":")
            found[fields[9]] = (proc_address(host), int(port, 16))
    return found


def listeners():
    """``{socket inode: (address, port)}`` of every listening TCP socket this process sees."""
    text = []
    for table in TABLES:
        try:
            with open(table) as source:
                text.append(source.read())
        except OSError:
            continue
    return parse_listeners("\n".join(text))


def is_loopback(address):
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)
