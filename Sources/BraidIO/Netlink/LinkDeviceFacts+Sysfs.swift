#if canImport(Glibc)
import Glibc
#endif

extension LinkDeviceFacts {
    /// Reads the facts of `link` from /sys/class/net, counting each system call into
    /// `systemCalls`. nil when /sys shows no link of that name and index: /sys belongs to the
    /// network namespace it was mounted in, which need not be the link's.
    package static func read(for link: NetlinkLink, systemCalls: inout Int) -> LinkDeviceFacts? {
        // A name is one path component of at most IFNAMSIZ - 1 bytes.
        guard !link.name.isEmpty, link.name.utf8.count < 16, !link.name.contains("/"), link.name != ".", link.name != ".." else {
            return nil
        }
        let directory = "/sys/class/net/\(link.name)"
        guard let index = readSmallFile("\(directory)/ifindex", systemCalls: &systemCalls),
            Int32(index.trimmed(" \n")) == link.index
        else { return nil }
        var facts = LinkDeviceFacts(isWireless: false, deviceType: nil, hasDevice: false)
        facts.isWireless = exists("\(directory)/wireless", systemCalls: &systemCalls) || exists("\(directory)/phy80211", systemCalls: &systemCalls)
        facts.hasDevice = exists("\(directory)/device", systemCalls: &systemCalls)
        if let uevent = readSmallFile("\(directory)/uevent", systemCalls: &systemCalls) {
            for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                facts.deviceType = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        return facts
    }

    private static func exists(_ path: String, systemCalls: inout Int) -> Bool {
        systemCalls += 1
        return access(path, F_OK) == 0
    }

    /// At most 4 KiB of a small text file (sysfs attributes are at most a page).
    package static func readSmallFile(_ path: String, systemCalls: inout Int) -> String? {
        systemCalls += 1
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer {
            systemCalls += 1
            close(fd)
        }
        var bytes = [UInt8](repeating: 0, count: 4096)
        var count = 0
        while count < bytes.count {
            systemCalls += 1
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            count += n
        }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }
}

extension String {
    fileprivate func trimmed(_ set: String) -> Substring {
        var slice = self[...]
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return slice
    }
}
