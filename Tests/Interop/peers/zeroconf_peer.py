"""Python zeroconf (an independent mDNS/DNS-SD implementation) as a peer of Braid's discovery.

  zeroconf_peer.py browse TYPE            prints a JSON line per service added, updated or removed
  zeroconf_peer.py register TYPE NAME PORT [key=value ...]
                                          advertises NAME, prints {"registered": NAME}, runs until
                                          SIGTERM, then unregisters (sending goodbyes)

TYPE is like "_game._tcp". Only IPv4 on every interface, so the peer sees what Braid sends.
"""
import json
import signal
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf


def emit(record):
    print(json.dumps(record), flush=True)


def browse(service_type):
    zc = Zeroconf(ip_version=IPVersion.V4Only)
    full = service_type + ".local."

    def on_change(zeroconf, service_type, name, state_change):
        entry = {"event": state_change.name.lower(), "name": name}
        if state_change is not ServiceStateChange.Removed:
            info = zeroconf.get_service_info(service_type, name, timeout=3000)
            if info is not None:
                entry["port"] = info.port
                entry["addresses"] = info.parsed_addresses()
                entry["txt"] = {k.decode(): (v.decode() if v is not None else None) for k, v in info.properties.items()}
                entry["server"] = info.server
        emit(entry)

    ServiceBrowser(zc, full, handlers=[on_change])
    emit({"browsing": full})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    zc.close()


def register(service_type, name, port, pairs):
    zc = Zeroconf(ip_version=IPVersion.V4Only)
    properties = dict(pair.split("=", 1) for pair in pairs)
    addresses = [socket.inet_aton(address) for address in local_addresses()]
    info = ServiceInfo(
        service_type + ".local.",
        name + "." + service_type + ".local.",
        addresses=addresses,
        port=port,
        properties=properties,
        server="zeroconf-peer-%d.local." % port,
    )
    zc.register_service(info, allow_name_change=True)
    emit({"registered": info.name})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    zc.unregister_service(info)
    zc.close()


def local_addresses():
    import ifaddr  # zeroconf's own dependency
    return [ip.ip for adapter in ifaddr.get_adapters() for ip in adapter.ips
            if isinstance(ip.ip, str) and not ip.ip.startswith("127.")]


if __name__ == "__main__":
    if sys.argv[1] == "browse":
        browse(sys.argv[2])
    elif sys.argv[1] == "register":
        register(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    else:
        sys.exit("usage: zeroconf_peer.py browse TYPE | register TYPE NAME PORT [key=value ...]")
