/// The querier side of DNS-SD browsing for one service type (RFC 6762 §5.2, RFC 6763 §4), sans-IO:
/// messages heard go in through `receive`, `poll` returns the queries due, `nextDeadline` says
/// when to poll again.
///
/// It asks for the type's PTR records at once, then after 1, 2, 4... seconds up to an hour,
/// each query listing the answers it already holds with more than half their TTL left (known-answer
/// suppression, RFC 6762 §7.1); asks again for a PTR record at 80% of its TTL; asks for the SRV and
/// TXT records of each instance and the addresses of each SRV target until they are heard
/// (backing off from 1 to 60 seconds, `resolveBatch` names at a time). Questions and known
/// answers are spread over queries of at most `queryBudget` bytes. Records expire with their TTL; a goodbye removes one a
/// second later. The cache is bounded (`MDNSCache`).
public struct MDNSBrowser: Sendable {
    /// The longest wait between two PTR queries (RFC 6762 §5.2).
    public static let maximumQueryInterval = Duration.seconds(3600)
    /// The longest wait between two queries for an instance's or a host's missing records.
    public static let maximumResolveInterval = Duration.seconds(60)
    /// Queries stay below this size, known answers beyond it left out (a typical Ethernet MTU
    /// less IP and UDP headers).
    public static let queryBudget = 1400
    /// At most this many instances and hosts are asked about in one poll; the others wait their
    /// turn, the longest-waiting first, so a flood of fake instances delays a real one by a few
    /// seconds at most rather than starving it.
    public static let resolveBatch = 16
    /// The pause after a full batch before the next one.
    public static let resolveBatchSpacing = Duration.milliseconds(100)
    /// At most this many queries per poll carry only known answers (after one with the TC bit).
    public static let maximumKnownAnswerQueries = 8

    public let serviceType: DNSName
    public private(set) var cache: MDNSCache
    var nextQuery: Duration
    var queryInterval = Duration.seconds(1)
    var resolving: [DNSName: (next: Duration, interval: Duration)] = [:]
    var resolveNotBefore = Duration.zero

    public init(serviceType: DNSName, now: Duration, cacheCapacity: Int = MDNSCache.defaultCapacity) {
        self.serviceType = serviceType
        self.cache = MDNSCache(capacity: cacheCapacity)
        self.nextQuery = now
    }

    public var cachedRecordCount: Int { cache.count }

    /// Takes in a message heard on `interface` from `fromPort`. Only responses from port 5353
    /// with opcode and rcode 0 count (RFC 6762 §6, §18.3, §18.11); their answer and additional
    /// records are cached.
    public mutating func receive(_ message: DNSMessage, interface: Int32, now: Duration, fromPort: UInt16 = MDNSSource.port) {
        guard message.isResponse, fromPort == MDNSSource.port, message.opcode == 0, message.rcode == 0 else { return }
        for record in message.answers + message.additionals where record.recordClass == 1 {
            cache.insert(record, interface: interface, now: now)
        }
    }

    /// When `poll` has something to do next.
    public var nextDeadline: Duration {
        var deadline = nextQuery
        if let expiry = cache.nextExpiry { deadline = min(deadline, expiry) }
        for entry in cache.entries(named: serviceType, type: .ptr) where !entry.refreshRequested {
            deadline = min(deadline, refreshTime(entry))
        }
        for (_, state) in resolving { deadline = min(deadline, max(state.next, resolveNotBefore)) }
        return deadline
    }

    /// Expires what is due and returns the queries to send now (multicast to port 5353).
    public mutating func poll(now: Duration) -> [DNSMessage] {
        cache.expire(now: now)
        var questions: [DNSQuestion] = []
        var askPTR = now >= nextQuery
        for entry in cache.entries(named: serviceType, type: .ptr) where !entry.refreshRequested && now >= refreshTime(entry) {
            cache.markRefreshRequested(entry)
            askPTR = true
        }
        if now >= nextQuery {
            nextQuery = now + queryInterval
            queryInterval = min(queryInterval * 2, Self.maximumQueryInterval)
        }
        if askPTR { questions.append(DNSQuestion(name: serviceType, type: .ptr)) }

        // What is still missing: SRV and TXT of each instance, addresses of each target.
        var wanted: [DNSName: [DNSRecordType]] = [:]
        for result in results() {
            var types: [DNSRecordType] = []
            if result.host == nil { types.append(.srv) }
            if cache.entries(named: result.instanceName, type: .txt).isEmpty { types.append(.txt) }
            if !types.isEmpty { wanted[result.instanceName] = types }
            if let host = result.host, result.addresses.isEmpty { wanted[host] = [.a, .aaaa] }
        }
        resolving = resolving.filter { wanted[$0.key] != nil }
        // A name not asked about yet waits its turn from now; the longest-waiting go first.
        for name in wanted.keys where resolving[name] == nil { resolving[name] = (next: now, interval: .seconds(1)) }
        if now >= resolveNotBefore {
            let due = resolving.filter { now >= $0.value.next }
                .sorted { $0.value.next == $1.value.next ? $0.key.description < $1.key.description : $0.value.next < $1.value.next }
            for (name, state) in due.prefix(Self.resolveBatch) {
                resolving[name] = (next: now + state.interval, interval: min(state.interval * 2, Self.maximumResolveInterval))
                questions += (wanted[name] ?? []).map { DNSQuestion(name: name, type: $0) }
            }
            if due.count > Self.resolveBatch { resolveNotBefore = now + Self.resolveBatchSpacing }
        }
        guard !questions.isEmpty else { return [] }
        return queries(asking: questions, now: now)
    }

    /// The questions spread over queries of at most `queryBudget` bytes, each followed by the
    /// known answers to its questions; when those do not fit, the query has the TC bit set and
    /// the rest follow in queries without questions (RFC 6762 §7.2), at most
    /// `maximumKnownAnswerQueries` of them per poll (what does not fit is left out, which only
    /// costs answers the querier already has).
    func queries(asking questions: [DNSQuestion], now: Duration) -> [DNSMessage] {
        let header = 12
        var groups: [[DNSQuestion]] = [[]]
        var size = header
        for question in questions {
            let cost = question.name.wireLength + 4
            if size + cost > Self.queryBudget, !groups[groups.count - 1].isEmpty {
                groups.append([])
                size = header
            }
            groups[groups.count - 1].append(question)
            size += cost
        }
        var out: [DNSMessage] = []
        var continuations = 0
        for group in groups {
            var query = DNSMessage(isResponse: false, questions: group)
            var size = header + group.reduce(0) { $0 + $1.name.wireLength + 4 }
            // The same record heard on two interfaces is listed once.
            var listed = Set<MDNSCache.Key>()
            for question in group {
                for entry in cache.entries(named: question.name, type: question.type) where entry.isFresh(at: now) {
                    let key = MDNSCache.Key(name: entry.record.name, recordClass: entry.record.recordClass, data: entry.record.data, interface: 0)
                    guard listed.insert(key).inserted else { continue }
                    var known = entry.record
                    known.ttl = UInt32(max(0, (entry.expires - now).components.seconds))
                    // An upper bound: the writer may compress the name, never lengthens it.
                    let cost = known.name.wireLength + 10 + DNSMessageWriter.uncompressedData(known.data).count
                    guard header + cost <= Self.queryBudget else { continue }
                    if size + cost > Self.queryBudget {
                        guard continuations < Self.maximumKnownAnswerQueries else { break }
                        continuations += 1
                        query.isTruncated = true
                        out.append(query)
                        query = DNSMessage(isResponse: false)
                        size = header
                    }
                    query.answers.append(known)
                    size += cost
                }
            }
            out.append(query)
        }
        return out
    }

    /// The instances known now, one per instance and interface, sorted by instance label (bytes).
    public func results() -> [MDNSBrowseResult] {
        var found: [MDNSBrowseResult] = []
        var seen = Set<ResultKey>()
        for entry in cache.entries(named: serviceType, type: .ptr) {
            guard case .ptr(let instance) = entry.record.data, instance.parent == serviceType,
                  seen.insert(ResultKey(instance: instance, interface: entry.interface)).inserted
            else { continue }
            var result = MDNSBrowseResult(instanceName: instance, interface: entry.interface, txt: [], host: nil, port: nil, addresses: [])
            // The latest heard: an updated TXT record replaces the old one at once, though the
            // old stays cached for a second after the cache-flush (RFC 6762 §10.2).
            if let txt = cache.entries(named: instance, type: .txt).filter({ $0.interface == entry.interface }).max(by: { $0.received < $1.received }),
               case .txt(let strings) = txt.record.data {
                result.txt = strings
            }
            if let srv = cache.entries(named: instance, type: .srv).first(where: { $0.interface == entry.interface }),
               case .srv(_, _, let port, let target) = srv.record.data {
                result.host = target
                result.port = port
                let addresses = cache.entries(named: target, type: .a) + cache.entries(named: target, type: .aaaa)
                result.addresses = addresses.filter { $0.interface == entry.interface }.map(\.record.data)
                    .sorted { "\($0)" < "\($1)" }
            }
            found.append(result)
        }
        return found.sorted { a, b in
            a.instance == b.instance ? a.interface < b.interface : a.instance.lexicographicallyPrecedes(b.instance)
        }
    }

    struct ResultKey: Hashable {
        var instance: DNSName
        var interface: Int32
    }

    func refreshTime(_ entry: MDNSCache.Entry) -> Duration {
        entry.received + .seconds(Int64(entry.record.ttl)) * 0.8
    }
}
