/// The responder side of DNS-SD for one service instance (RFC 6762 §8–§10, RFC 6763 §12),
/// sans-IO: messages heard go in through `receive`, `poll` returns what is due, `nextDeadline`
/// says when to poll again.
///
/// It probes its instance name and host name three times 250 ms apart (after a random wait of up
/// to 250 ms); a response naming either with other data is a conflict, and the name is renamed
/// ("Table 7" becomes "Table 7 (2)", the host "host" becomes "host-2") and probed again; a
/// simultaneous probe is settled by RFC 6762 §8.2's tie-break (the loser probes again a second
/// later). Then it announces twice a second apart, answers queries (shared records after 20–120 ms,
/// unique ones at once, leaving out what the query already knows, RFC 6762 §7.1), defends its
/// names, and says goodbye (TTL 0) when asked. Responses are multicast, except to legacy unicast
/// queries (not from port 5353), which get a unicast answer with the query's ID (RFC 6762 §6.7).
/// An answer goes out on the interface its query came on (`pollOutgoing`'s and `receive`'s
/// `Outgoing.interface`); a query with the TC bit is answered once its known-answer parts from
/// the same querier are in, 400–500 ms later (RFC 6762 §7.2; bounded: `maximumWaitingQueries`,
/// `maximumWaitingKnownAnswers`, `maximumKnownAnswerParts`). `addressed(_:to:)` gives the copy of
/// a message for one interface, with that interface's addresses alone (RFC 6762 §6.2); a probe
/// of its own heard back on another interface carries fewer addresses and is not a rival.
/// `update(addresses:now:)` takes the host's addresses anew and announces them, and
/// `update(txt:now:)` a new TXT record (RFC 6762 §8.4).
public struct MDNSResponder: Sendable {
    /// TTLs of RFC 6762 §10: host-related records 120 s, the others 75 minutes.
    public static let hostRecordTTL: UInt32 = 120
    public static let otherRecordTTL: UInt32 = 4500

    /// The TTLs a responder gives its records: RFC 6762 §10's by default. Shorter ones make a
    /// host that vanished without a goodbye leave browsers' results sooner, at the cost of more
    /// queries; the tests use them to see records expire within their deadlines.
    public struct RecordTTLs: Hashable, Sendable {
        /// The SRV, A and AAAA records' TTL.
        public var host: UInt32
        /// The PTR and TXT records' TTL.
        public var other: UInt32

        public init(host: UInt32, other: UInt32) {
            self.host = max(1, host)
            self.other = max(1, other)
        }

        /// 120 s and 75 minutes (RFC 6762 §10).
        public static let standard = RecordTTLs(host: MDNSResponder.hostRecordTTL, other: MDNSResponder.otherRecordTTL)
    }

    /// The TTLs of this responder's records.
    public let ttls: RecordTTLs
    /// After this many conflicts within ten seconds, wait five seconds before probing again
    /// (RFC 6762 §8.1).
    public static let conflictBurst = 15

    public enum Event: Hashable, Sendable {
        /// The instance won its name and is announced under it.
        case registered(instance: [UInt8])
        /// A conflict made the instance take a new name; probing starts again.
        case renamed(from: [UInt8], to: [UInt8])
        /// The instance is no longer announced for now, under this name (avahi-daemon withdrew
        /// it while it renames the host after a conflict); `registered` follows once it is again.
        case withdrawn(instance: [UInt8])
    }

    public struct Outgoing: Hashable, Sendable {
        public var message: DNSMessage
        /// Whether it goes to the sender of the query (a legacy unicast answer) rather than to
        /// the multicast group.
        public var unicastToSender: Bool
        /// The interface it goes out on: the one the query arrived on; nil, every interface
        /// the responder runs on.
        public var interface: Int32?

        public init(message: DNSMessage, unicastToSender: Bool, interface: Int32? = nil) {
            self.message = message
            self.unicastToSender = unicastToSender
            self.interface = interface
        }
    }

    /// A query with the TC bit waits this long, plus up to `knownAnswerWaitJitter`, for the
    /// rest of its known answers (RFC 6762 §7.2: 400–500 ms); each further truncated part from
    /// the same querier starts the wait again, at most `maximumKnownAnswerParts` times.
    public static let knownAnswerWait = Duration.milliseconds(400)
    public static let knownAnswerWaitJitter = Duration.milliseconds(100)
    public static let maximumKnownAnswerParts = 8
    /// At most this many queriers' truncated queries wait at once; a query beyond them is
    /// answered without waiting (at worst with answers the querier has).
    public static let maximumWaitingQueries = 32
    /// At most this many known answers are kept for one waiting query; more are ignored (at
    /// worst answered again). Only known answers that are one of the responder's own records
    /// are kept at all (nothing else suppresses an answer), each once.
    public static let maximumWaitingKnownAnswers = 512

    /// A truncated query waiting for its known-answer parts.
    struct WaitingQuery: Sendable {
        var message: DNSMessage
        var fromPort: UInt16
        var interface: Int32
        var until: Duration
        var parts: Int
    }

    /// Who a waiting query came from: the known-answer parts come from the same address and
    /// port, on the same interface.
    struct Querier: Hashable, Sendable {
        var address: [UInt8]
        var port: UInt16
        var interface: Int32
    }

    enum Phase: Hashable, Sendable {
        case probing(sent: Int)
        case announcing(sent: Int)
        case running
        case stopped
    }

    public private(set) var service: MDNSServiceDescription
    var phase: Phase = .probing(sent: 0)
    var nextAction: Duration
    var random: SplitMix
    var baseInstance: [UInt8]
    var baseHost: [UInt8]
    var instanceNumber = 1
    var hostNumber = 1
    var conflicts: [Duration] = []
    /// Shared records to answer after a short random delay, by the interface the question
    /// came on (0: unknown, every interface).
    var pendingAnswers: [Int32: [DNSResourceRecord]] = [:]
    var pendingAt: Duration?
    var waiting: [Querier: WaitingQuery] = [:]
    var events: [Event] = []

    public init(service: MDNSServiceDescription, now: Duration, seed: UInt64 = UInt64.random(in: 0...UInt64.max), ttls: RecordTTLs = .standard) {
        self.service = service
        self.ttls = ttls
        self.baseInstance = service.instance
        self.baseHost = service.hostLabel
        self.random = SplitMix(state: seed)
        self.nextAction = .zero
        self.nextAction = now + .milliseconds(Int64(random.next() % 250))
    }

    public var instanceName: DNSName { (try? DNSName(prefix: service.instance, service.serviceType)) ?? service.serviceType }
    public var hostName: DNSName { DNSName(uncheckedLabels: [service.hostLabel, Array("local".utf8)]) }
    /// Whether probing is over and the instance is announced under `service.instance`.
    public var isRegistered: Bool { phase == .running || { if case .announcing = phase { true } else { false } }() }

    /// The events since the last call.
    public mutating func takeEvents() -> [Event] {
        defer { events = [] }
        return events
    }

    var uniqueRecords: [DNSResourceRecord] {
        let instance = instanceName
        let host = hostName
        return [
            DNSResourceRecord(name: instance, cacheFlush: true, ttl: ttls.host,
                              data: .srv(priority: 0, weight: 0, port: service.port, target: host)),
            DNSResourceRecord(name: instance, cacheFlush: true, ttl: ttls.other, data: .txt(service.txt)),
        ] + service.addresses.map { DNSResourceRecord(name: host, cacheFlush: true, ttl: ttls.host, data: $0) }
    }

    var sharedRecords: [DNSResourceRecord] {
        let enumeration = DNSName(uncheckedLabels: [Array("_services".utf8), Array("_dns-sd".utf8), Array("_udp".utf8)] + service.serviceType.labels.suffix(1))
        return [
            DNSResourceRecord(name: service.serviceType, ttl: ttls.other, data: .ptr(instanceName)),
            DNSResourceRecord(name: enumeration, ttl: ttls.other, data: .ptr(service.serviceType)),
        ]
    }

    var allRecords: [DNSResourceRecord] { sharedRecords + uniqueRecords }

    /// When `poll` has something to do next; nil once stopped with nothing pending.
    public var nextDeadline: Duration? {
        var deadline: Duration? = phase == .running || phase == .stopped ? nil : nextAction
        if let pendingAt { deadline = min(deadline ?? pendingAt, pendingAt) }
        for query in waiting.values { deadline = min(deadline ?? query.until, query.until) }
        return deadline
    }

    /// The probes, announcements and delayed answers due at `now` (all multicast).
    public mutating func poll(now: Duration) -> [DNSMessage] {
        pollOutgoing(now: now).map(\.message)
    }

    /// What is due at `now`: probes and announcements (every interface), delayed answers and
    /// answers to truncated queries whose wait is over (the interface the query came on, or
    /// its sender for a legacy query).
    public mutating func pollOutgoing(now: Duration) -> [Outgoing] {
        var out: [Outgoing] = []
        for (querier, query) in waiting where now >= query.until {
            waiting[querier] = nil
            // A conflict since made us probe again: no answers until the name is ours (as `receive`).
            if case .probing = phase { continue }
            out += answer(query.message, now: now, fromPort: query.fromPort, interface: query.interface)
        }
        if let at = pendingAt, now >= at {
            pendingAt = nil
            if phase != .stopped {
                for (interface, answers) in pendingAnswers.sorted(by: { $0.key < $1.key }) {
                    if let response = response(answering: answers, ttlCap: nil) {
                        out.append(Outgoing(message: response, unicastToSender: false, interface: interface == 0 ? nil : interface))
                    }
                }
            }
            pendingAnswers = [:]
        }
        return out + pollAnnouncements(now: now).map { Outgoing(message: $0, unicastToSender: false) }
    }

    mutating func pollAnnouncements(now: Duration) -> [DNSMessage] {
        var out: [DNSMessage] = []
        guard now >= nextAction else { return out }
        switch phase {
        case .probing(let sent) where sent < 3:
            out.append(DNSMessage(
                isResponse: false,
                questions: [DNSQuestion(name: instanceName, type: .any), DNSQuestion(name: hostName, type: .any)],
                authorities: uniqueRecords.map { var record = $0; record.cacheFlush = false; return record }))
            phase = .probing(sent: sent + 1)
            nextAction = now + .milliseconds(250)
        case .probing:
            phase = .announcing(sent: 0)
            events.append(.registered(instance: service.instance))
            return out + pollAnnouncements(now: now)
        case .announcing(let sent):
            out.append(DNSMessage(isResponse: true, isAuthoritative: true, answers: allRecords))
            if sent + 1 >= 2 {
                phase = .running
            } else {
                phase = .announcing(sent: sent + 1)
                nextAction = now + .seconds(1)
            }
        case .running, .stopped:
            break
        }
        return out
    }

    /// Takes in a message heard; returns what must go out at once.
    public mutating func receive(_ message: DNSMessage, now: Duration, fromPort: UInt16 = 5353) -> [Outgoing] {
        receive(message, now: now, from: MDNSSource(address: [], port: fromPort), interface: 0)
    }

    /// Takes in a message heard from `source` on `interface` (0: unknown); returns what must
    /// go out at once. A query with the TC bit waits for its known-answer parts from the same
    /// source (RFC 6762 §7.2) and is answered by `pollOutgoing` once they are in.
    public mutating func receive(_ message: DNSMessage, now: Duration, from source: MDNSSource, interface: Int32) -> [Outgoing] {
        let fromPort = source.port
        guard message.opcode == 0, message.rcode == 0, phase != .stopped else { return [] }
        if message.isResponse {
            // A response from another port is no multicast DNS responder's (RFC 6762 §6).
            guard fromPort == MDNSSource.port else { return [] }
            checkConflicts(in: message.answers + message.additionals, now: now)
            return []
        }
        if case .probing = phase {
            settleSimultaneousProbe(message.authorities, now: now)
            return []
        }
        let querier = Querier(address: source.address, port: source.port, interface: interface)
        if message.questions.isEmpty {
            // A known-answer part of a truncated query.
            guard var query = waiting[querier] else { return [] }
            query.message.answers = keptKnownAnswers(query.message.answers, adding: message.answers)
            if message.isTruncated, query.parts < Self.maximumKnownAnswerParts {
                query.parts += 1
                query.until = now + knownAnswerDelay()
            }
            waiting[querier] = query
            return []
        }
        // A legacy querier (not port 5353) is answered at once, to its address.
        // A probe (authority records) is answered at once, never held (RFC 6762 §6).
        if message.isTruncated, fromPort == MDNSSource.port, message.authorities.isEmpty,
           waiting[querier] == nil, waiting.count < Self.maximumWaitingQueries {
            var held = message
            held.answers = keptKnownAnswers([], adding: message.answers)
            held.additionals = []
            waiting[querier] = WaitingQuery(message: held, fromPort: fromPort, interface: interface, until: now + knownAnswerDelay(), parts: 0)
            return []
        }
        return answer(message, now: now, fromPort: fromPort, interface: interface)
    }

    /// `kept` with those of `heard` that are one of our own records, each record once with the
    /// highest TTL heard: suppression in `answer` looks at nothing else, so what a waiting query
    /// holds is bounded by our records, not by what a querier sends
    /// (`maximumWaitingKnownAnswers` stays as a backstop).
    func keptKnownAnswers(_ kept: [DNSResourceRecord], adding heard: [DNSResourceRecord]) -> [DNSResourceRecord] {
        let ours = allRecords
        var out = kept
        for record in heard where ours.contains(where: { $0.isSameRecord(as: record) }) {
            if let index = out.firstIndex(where: { $0.isSameRecord(as: record) }) {
                if record.ttl > out[index].ttl { out[index] = record }
            } else if out.count < Self.maximumWaitingKnownAnswers {
                out.append(record)
            }
        }
        return out
    }

    /// The known answers all waiting queries hold, in records.
    var waitingKnownAnswerCount: Int { waiting.values.reduce(0) { $0 + $1.message.answers.count } }

    mutating func knownAnswerDelay() -> Duration {
        Self.knownAnswerWait + Self.knownAnswerWaitJitter * (Double(random.next() % 1001) / 1000)
    }

    /// Answers `query`'s questions, leaving out what its known answers hold: unique records and
    /// answers to probes and legacy queries at once, shared records after 20–120 ms.
    mutating func answer(_ query: DNSMessage, now: Duration, fromPort: UInt16, interface: Int32) -> [Outgoing] {
        var immediate: [DNSResourceRecord] = []
        for question in query.questions {
            for record in allRecords where question.isAnswered(by: record) {
                let known = query.answers.contains { $0.isSameRecord(as: record) && $0.ttl >= record.ttl / 2 }
                if known { continue }
                if fromPort != 5353 || !query.authorities.isEmpty || record.cacheFlush {
                    immediate.append(record)
                } else if !(pendingAnswers[interface] ?? []).contains(where: { $0.isSameRecord(as: record) }) {
                    pendingAnswers[interface, default: []].append(record)
                }
            }
        }
        if !pendingAnswers.isEmpty, pendingAt == nil {
            pendingAt = now + .milliseconds(20 + Int64(random.next() % 101))
        }
        guard !immediate.isEmpty else { return [] }
        if fromPort != 5353 {
            // Legacy unicast: the query's ID and questions, TTLs of at most 10 s, no cache-flush bits.
            guard var response = response(answering: immediate, ttlCap: 10) else { return [] }
            response.id = query.id
            response.questions = query.questions
            return [Outgoing(message: response, unicastToSender: true, interface: interface == 0 ? nil : interface)]
        }
        return response(answering: immediate, ttlCap: nil).map {
            [Outgoing(message: $0, unicastToSender: false, interface: interface == 0 ? nil : interface)]
        } ?? []
    }

    /// `message` as sent on an interface whose addresses are `addresses`: of the host's A and
    /// AAAA records, only that interface's (RFC 6762 §6.2: a responder's address records on an
    /// interface are the addresses valid there). Nil when nothing is left to send.
    public func addressed(_ message: DNSMessage, to addresses: [DNSRecordData]) -> DNSMessage? {
        let host = hostName
        func keep(_ record: DNSResourceRecord) -> Bool {
            guard record.name == host else { return true }
            switch record.data {
            case .a, .aaaa: return addresses.contains(record.data)
            default: return true
            }
        }
        var out = message
        out.answers = message.answers.filter(keep)
        out.authorities = message.authorities.filter(keep)
        out.additionals = message.additionals.filter(keep)
        if out.questions.isEmpty, out.answers.isEmpty, out.authorities.isEmpty { return nil }
        return out
    }

    /// Gives the responder the host's addresses anew (an interface renumbered, came or went).
    /// When they changed, a registered responder announces its records again, twice a second
    /// apart (RFC 6762 §8.4); the cache-flush bit makes caches drop the old addresses. While
    /// probing, the probes carry the new addresses from now on.
    public mutating func update(addresses: [DNSRecordData], now: Duration) {
        guard phase != .stopped, Set(addresses) != Set(service.addresses) else { return }
        service.addresses = addresses
        if isRegistered {
            phase = .announcing(sent: 0)
            nextAction = now
        }
    }

    /// Gives the instance a new TXT record (RFC 6762 §8.4): a registered responder announces
    /// its records again, twice a second apart, the TXT record's cache-flush bit making caches
    /// drop the old one; the name stays, so there is no probe and no goodbye. While probing,
    /// the probes carry the new record from now on.
    public mutating func update(txt: [[UInt8]], now: Duration) {
        guard phase != .stopped, txt != service.txt else { return }
        service.txt = txt
        if isRegistered {
            phase = .announcing(sent: 0)
            nextAction = now
        }
    }

    /// The goodbye to send on cancel (every record with TTL 0), if anything was announced; stops
    /// the responder either way.
    public mutating func goodbye() -> DNSMessage? {
        defer { phase = .stopped; pendingAnswers = [:]; pendingAt = nil; waiting = [:] }
        guard isRegistered else { return nil }
        return DNSMessage(isResponse: true, isAuthoritative: true, answers: allRecords.map { var record = $0; record.ttl = 0; return record })
    }

    func response(answering answers: [DNSResourceRecord], ttlCap: UInt32?) -> DNSMessage? {
        guard !answers.isEmpty else { return nil }
        var additionals: [DNSResourceRecord] = []
        for answer in answers {
            switch answer.data {
            case .ptr(let target) where target == instanceName:
                additionals += uniqueRecords
            case .srv:
                additionals += uniqueRecords.filter { $0.name == hostName }
            default:
                break
            }
        }
        additionals = additionals.reduce(into: []) { kept, record in
            if !answers.contains(where: { $0.isSameRecord(as: record) }), !kept.contains(where: { $0.isSameRecord(as: record) }) {
                kept.append(record)
            }
        }
        var message = DNSMessage(isResponse: true, isAuthoritative: true, answers: answers, additionals: additionals)
        if let cap = ttlCap {
            for index in message.answers.indices {
                message.answers[index].ttl = min(message.answers[index].ttl, cap)
                message.answers[index].cacheFlush = false
            }
            for index in message.additionals.indices {
                message.additionals[index].ttl = min(message.additionals[index].ttl, cap)
                message.additionals[index].cacheFlush = false
            }
        }
        return message
    }

    /// A record heard in a response that names our instance or host with data we do not have is a
    /// conflict (RFC 6762 §8.1 while probing, §9 after): rename while probing, probe again after.
    mutating func checkConflicts(in records: [DNSResourceRecord], now: Duration) {
        let mine = uniqueRecords
        for record in records where record.ttl > 0 && (record.name == instanceName || record.name == hostName) {
            if mine.contains(where: { $0.isSameRecord(as: record) }) { continue }
            if case .probing = phase {
                rename(host: record.name == hostName, now: now)
                return
            }
            // After probing, only a record of a type we hold conflicts; probe again.
            if mine.contains(where: { $0.name == record.name && $0.data.type == record.data.type }) {
                phase = .probing(sent: 0)
                nextAction = now
                return
            }
        }
    }

    /// RFC 6762 §8.2: compare the other prober's records for each of our names with ours, sorted;
    /// the lexicographically later set wins. The loser waits a second and probes again.
    mutating func settleSimultaneousProbe(_ authorities: [DNSResourceRecord], now: Duration) {
        for name in [instanceName, hostName] {
            let theirs = authorities.filter { $0.name == name }
            guard !theirs.isEmpty else { continue }
            let ours = uniqueRecords.filter { $0.name == name }
            // Our own probe, heard back on another interface: each interface's copy carries
            // that interface's addresses alone, a part of ours.
            if theirs.allSatisfy({ record in ours.contains { $0.isSameRecord(as: record) } }) { continue }
            if Self.sortKey(theirs).lexicographicallyPrecedes(Self.sortKey(ours), by: { $0.lexicographicallyPrecedes($1) }) {
                continue
            }
            if Self.sortKey(theirs) == Self.sortKey(ours) { continue }
            phase = .probing(sent: 0)
            nextAction = now + .seconds(1)
            return
        }
    }

    static func sortKey(_ records: [DNSResourceRecord]) -> [[UInt8]] {
        records.map { record in
            [UInt8(record.recordClass >> 8), UInt8(record.recordClass & 0xFF),
             UInt8(record.data.type.rawValue >> 8), UInt8(record.data.type.rawValue & 0xFF)]
                + DNSMessageWriter.uncompressedData(record.data)
        }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    mutating func rename(host: Bool, now: Duration) {
        conflicts = conflicts.filter { now - $0 < .seconds(10) } + [now]
        if host {
            hostNumber += 1
            service.hostLabel = Self.numbered(baseHost, suffix: "-\(hostNumber)")
        } else {
            let old = service.instance
            instanceNumber += 1
            service.instance = Self.numbered(baseInstance, suffix: " (\(instanceNumber))")
            events.append(.renamed(from: old, to: service.instance))
        }
        phase = .probing(sent: 0)
        nextAction = conflicts.count > Self.conflictBurst ? now + .seconds(5) : now
    }

    /// `base` with `suffix`, cutting whole characters off `base` to keep within 63 bytes.
    static func numbered(_ base: [UInt8], suffix: String) -> [UInt8] {
        var head = String(decoding: base, as: UTF8.self)
        while head.utf8.count + suffix.utf8.count > DNSName.maximumLabelLength { head.removeLast() }
        return Array((head + suffix).utf8)
    }
}
