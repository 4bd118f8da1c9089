/// The records a querier has heard, each until its TTL runs out (RFC 6762 §10), per interface.
///
/// Bounded: at most `capacity` records (4096 by default). When full, a new record displaces the
/// one closest to expiring, so a flood of fake announcements costs a fixed amount of memory and
/// displaces the records closest to expiring first.
public struct MDNSCache: Sendable {
    public static let defaultCapacity = 4096

    public struct Entry: Hashable, Sendable {
        public var record: DNSResourceRecord
        public var interface: Int32
        public var received: Duration
        public var expires: Duration
        /// Whether the 80%-of-TTL refresh query went out (RFC 6762 §5.2).
        var refreshRequested = false

        /// Whether, at `now`, more than half of the record's TTL remains (RFC 6762 §7.1's test for
        /// putting it in a query's known answers).
        public func isFresh(at now: Duration) -> Bool {
            (expires - now) * 2 > .seconds(Int64(record.ttl))
        }
    }

    struct Key: Hashable, Sendable {
        var name: DNSName
        var recordClass: UInt16
        var data: DNSRecordData
        var interface: Int32
    }

    struct Group: Hashable, Sendable {
        var name: DNSName
        var type: DNSRecordType
    }

    public let capacity: Int
    var entries: [Key: Entry] = [:]
    var groups: [Group: Set<Key>] = [:]

    public init(capacity: Int = MDNSCache.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { entries.count }

    /// Adds or refreshes a record heard on `interface`. A TTL of 0 is a goodbye: the record
    /// goes one second later (RFC 6762 §10.1). A cache-flush record makes the other records of
    /// its name and type on that interface, heard more than a second ago, go in one second
    /// (RFC 6762 §10.2).
    public mutating func insert(_ record: DNSResourceRecord, interface: Int32, now: Duration) {
        let key = Key(name: record.name, recordClass: record.recordClass, data: record.data, interface: interface)
        let group = Group(name: record.name, type: record.data.type)
        if record.ttl == 0 {
            if entries[key] != nil { entries[key]!.expires = min(entries[key]!.expires, now + .seconds(1)) }
            return
        }
        if record.cacheFlush, let keys = groups[group] {
            for other in keys where other != key && other.interface == interface {
                if let entry = entries[other], now - entry.received > .seconds(1) {
                    entries[other]!.expires = min(entry.expires, now + .seconds(1))
                }
            }
        }
        if entries[key] == nil, entries.count >= capacity {
            evictOne()
        }
        var stored = record
        stored.cacheFlush = false
        entries[key] = Entry(record: stored, interface: interface, received: now, expires: now + .seconds(Int64(record.ttl)))
        groups[group, default: []].insert(key)
    }

    /// The records of `name` and `type` (every type for `.any`), on every interface.
    public func entries(named name: DNSName, type: DNSRecordType) -> [Entry] {
        if type == .any {
            return entries.values.filter { $0.record.name == name }
        }
        return (groups[Group(name: name, type: type)] ?? []).compactMap { entries[$0] }
    }

    /// Removes what has expired by `now`; returns what it removed.
    @discardableResult
    public mutating func expire(now: Duration) -> [Entry] {
        let gone = entries.filter { $0.value.expires <= now }
        for (key, _) in gone { remove(key) }
        return Array(gone.values)
    }

    /// The earliest expiry, if anything is cached.
    public var nextExpiry: Duration? { entries.values.lazy.map(\.expires).min() }

    mutating func markRefreshRequested(_ entry: Entry) {
        let key = Key(name: entry.record.name, recordClass: entry.record.recordClass, data: entry.record.data, interface: entry.interface)
        entries[key]?.refreshRequested = true
    }

    /// Makes room: drops the eighth of the records closest to expiring at once, so a flood
    /// costs one sort per eighth of the capacity rather than a scan per record.
    mutating func evictOne() {
        let victims = entries.sorted { $0.value.expires < $1.value.expires }.prefix(max(1, capacity / 8))
        for (key, _) in victims { remove(key) }
    }

    mutating func remove(_ key: Key) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        let group = Group(name: key.name, type: entry.record.data.type)
        groups[group]?.remove(key)
        if groups[group]?.isEmpty == true { groups[group] = nil }
    }
}
