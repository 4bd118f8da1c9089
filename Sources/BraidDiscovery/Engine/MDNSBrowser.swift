/// The querier side of DNS-SD browsing for one service type (RFC 6762 §5.2, RFC 6763 §4), sans-IO:
/// messages heard go in through `receive`, `poll` returns the queries due, `nextDeadline` says
/// when to poll again.
///
/// It asks for the type's PTR records at once, then after 1, 2, 4... seconds up to an hour,
/// each query listing the answers it already holds with more than half their TTL left (known-answer
/// suppression, RFC 6762 §7.1); asks again for a PTR record at 80% of its TTL; asks for the SRV and
/// TXT records of each instance and the addresses of each SRV target until they are heard
/// (backing off from 1 to 60 seconds). Records expire with their TTL; a goodbye removes one a
/// second later. The cache is bounded (`MDNSCache`).
public struct MDNSBrowser: Sendable {
    /// The longest wait between two PTR queries (RFC 6762 §5.2).
    public static let maximumQueryInterval = Duration.seconds(3600)
    /// The longest wait between two queries for an instance's or a host's missing records.
    public static let maximumResolveInterval = Duration.seconds(60)
    /// Queries stay below this size, known answers beyond it left out (a typical Ethernet MTU
    /// less IP and UDP headers).
    public static let queryBudget = 1400

    public let serviceType: DNSName
    public private(set) var cache: MDNSCache
    var nextQuery: Duration
    var queryInterval = Duration.seconds(1)
    var resolving: [DNSName: (next: Duration, interval: Duration)] = [:]

    public init(serviceType: DNSName, now: Duration, cacheCapacity: Int = MDNSCache.defaultCapacity) {
        self.serviceType = serviceType
        self.cache = MDNSCache(capacity: cacheCapacity)
        self.nextQuery = now
    }

    public var cachedRecordCount: Int { cache.count }

    /// Takes in a message heard on `interface`. Only responses with opcode and rcode 0 count
    /// (RFC 6762 §18.3, §18.11); their answer and additional records are cached.
    public mutating func receive(_ message: DNSMessage, interface: Int32, now: Duration) {
        guard message.isResponse, message.opcode == 0, message.rcode == 0 else { return }
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
        for (_, state) in resolving { deadline = min(deadline, state.next) }
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
        for (name, types) in wanted.sorted(by: { $0.key.description < $1.key.description }) {
            let state = resolving[name] ?? (next: now, interval: .seconds(1))
            guard now >= state.next else { continue }
            resolving[name] = (next: now + state.interval, interval: min(state.interval * 2, Self.maximumResolveInterval))
            questions += types.map { DNSQuestion(name: name, type: $0) }
        }
        guard !questions.isEmpty else { return [] }

        var query = DNSMessage(isResponse: false, questions: questions)
        var size = query.serialized().count
        for question in questions {
            for entry in cache.entries(named: question.name, type: question.type) where entry.isFresh(at: now) {
                var known = entry.record
                known.ttl = UInt32(max(0, (entry.expires - now).components.seconds))
                let cost = known.name.wireLength + 10 + 64
                guard size + cost <= Self.queryBudget else { break }
                if !query.answers.contains(where: { $0.isSameRecord(as: known) }) {
                    query.answers.append(known)
                    size += cost
                }
            }
        }
        return [query]
    }

    /// The instances known now, one per instance and interface, sorted by instance label (bytes).
    public func results() -> [MDNSBrowseResult] {
        var found: [MDNSBrowseResult] = []
        for entry in cache.entries(named: serviceType, type: .ptr) {
            guard case .ptr(let instance) = entry.record.data, instance.parent == serviceType,
                  !found.contains(where: { $0.instanceName == instance && $0.interface == entry.interface })
            else { continue }
            var result = MDNSBrowseResult(instanceName: instance, interface: entry.interface, txt: [], host: nil, port: nil, addresses: [])
            if let txt = cache.entries(named: instance, type: .txt).first(where: { $0.interface == entry.interface }),
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

    func refreshTime(_ entry: MDNSCache.Entry) -> Duration {
        entry.received + .seconds(Int64(entry.record.ttl)) * 0.8
    }
}
