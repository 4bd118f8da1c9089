// Compiled twice: into BraidTests (which replays the corpus), and by tools/fuzz.sh discovery
// with swiftc, together with Sources/BraidDiscovery and tools/fuzz/DiscoveryFuzzMain.swift, into
// one libFuzzer module (where BraidDiscovery is not a separate module).
#if canImport(BraidDiscovery)
import BraidDiscovery
#endif

/// One fuzz input through the DNS message parser and the mDNS engines, checking what must hold
/// for any bytes: the parser returns a message or throws `DNSWireError`; a parsed message
/// re-serializes to bytes that parse to the same message; the browser's and the responder's
/// state stays within their documented bounds whatever they are fed.
enum DiscoveryFuzzInput {
    struct Outcome {
        var parsed = 0
        var rejected = 0
        var records = 0
    }

    /// The input is cut into packets at each 0xFF 0xFE 0xFD marker, each fed in turn.
    static func run(_ input: [UInt8]) -> Outcome {
        var outcome = Outcome()
        var packets: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 0
        while index < input.count {
            if index + 2 < input.count, input[index] == 0xFF, input[index + 1] == 0xFE, input[index + 2] == 0xFD {
                packets.append(current)
                current = []
                index += 3
            } else {
                current.append(input[index])
                index += 1
            }
        }
        packets.append(current)
        var browser = MDNSBrowser(serviceType: try! DNSName("_fuzz._tcp.local"), now: .zero)
        var responder = MDNSResponder(
            service: MDNSServiceDescription(
                instance: Array("Fuzz".utf8), serviceType: try! DNSName("_fuzz._tcp.local"), port: 9, txt: [],
                hostLabel: Array("fuzz-host".utf8), addresses: [.a([10, 0, 0, 1])]),
            now: .zero)
        var now = Duration.zero
        for packet in packets {
            now += .milliseconds(300)
            do {
                let message = try DNSMessage(parsing: packet)
                outcome.parsed += 1
                outcome.records += message.records.count
                let again = try DNSMessage(parsing: message.serialized())
                precondition(again == message, "a parsed message does not survive a round trip")
                browser.receive(message, interface: 1, now: now)
                _ = responder.receive(message, now: now)
            } catch {
                outcome.rejected += 1
            }
            _ = browser.poll(now: now)
            _ = responder.poll(now: now)
            precondition(browser.cachedRecordCount <= MDNSCache.defaultCapacity, "the cache grew past its bound")
        }
        return outcome
    }

    /// Seeds: a browse response, a query with known answers, a probe, and hostile packets.
    static func seeds() -> [(name: String, bytes: [UInt8])] {
        let type = try! DNSName("_fuzz._tcp.local")
        let instance = try! DNSName(prefix: Array("Peer".utf8), type)
        let host = try! DNSName("peer.local")
        let response = DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [DNSResourceRecord(name: type, ttl: 4500, data: .ptr(instance))],
            additionals: [
                DNSResourceRecord(name: instance, cacheFlush: true, ttl: 120, data: .srv(priority: 0, weight: 0, port: 80, target: host)),
                DNSResourceRecord(name: instance, cacheFlush: true, ttl: 4500, data: .txt([Array("k=v".utf8)])),
                DNSResourceRecord(name: host, cacheFlush: true, ttl: 120, data: .a([10, 0, 0, 2])),
            ])
        let goodbye = DNSMessage(isResponse: true, isAuthoritative: true, answers: [DNSResourceRecord(name: type, ttl: 0, data: .ptr(instance))])
        let query = DNSMessage(
            isResponse: false, questions: [DNSQuestion(name: type, type: .ptr)],
            answers: [DNSResourceRecord(name: type, ttl: 4500, data: .ptr(instance))])
        let fuzzInstance = try! DNSName(prefix: Array("Fuzz".utf8), type)
        let probe = DNSMessage(
            isResponse: false, questions: [DNSQuestion(name: fuzzInstance, type: .any)],
            authorities: [DNSResourceRecord(name: fuzzInstance, ttl: 120, data: .srv(priority: 0, weight: 0, port: 99, target: host))])
        let separator: [UInt8] = [0xFF, 0xFE, 0xFD]
        let header: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        return [
            ("browse-response-then-goodbye", response.serialized() + separator + goodbye.serialized()),
            ("query-with-known-answer", query.serialized()),
            ("conflicting-probe", probe.serialized()),
            ("pointer-loop", header + [1, 0x61, 0xC0, 16, 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 10, 0, 4, 1, 2, 3, 4]),
            ("huge-counts", [0, 0, 0x84, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]),
            ("truncated-srv", Array(response.serialized().dropLast(30))),
        ]
    }
}
