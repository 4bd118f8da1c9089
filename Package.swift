// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Braid",
    products: [
        // The supported API. The engines and the datapath are the package's own (`package`
        // access): the tests, the benchmarks and the tool use them, users do not.
        .library(name: "Braid", targets: ["Braid"]),
        .library(name: "BraidFramers", targets: ["BraidFramers"]),
        // Listeners as swift-service-lifecycle services, for servers that run in a ServiceGroup.
        .library(name: "BraidServiceLifecycle", targets: ["BraidServiceLifecycle"]),
        .executable(name: "braid", targets: ["braid"]),
        .executable(name: "benchmarks", targets: ["benchmarks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Only for `swift package generate-documentation`; adds nothing to a build.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // C shims: module map for ngtcp2, ngtcp2_crypto_gnutls, GnuTLS and nghttp3, plus the
        // wrappers Swift cannot import (versioned macros, variadic log callback, global pointers).
        .target(
            name: "CBraid",
            path: "Sources/CBraid",
            linkerSettings: [
                .linkedLibrary("ngtcp2"),
                .linkedLibrary("ngtcp2_crypto_gnutls"),
                .linkedLibrary("gnutls"),
                .linkedLibrary("nghttp3"),
                .linkedLibrary("z"),
            ]
        ),
        // The values every layer speaks: socket addresses, ECN marks, monotonic instants, UDP
        // segmentation limits. Below both the engines and the datapath, so neither imports the other.
        .target(
            name: "BraidCore",
            dependencies: [
                "CBraidLock", .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidCore"),
        // The lock word under BraidCore's `Locked`: a futex lock that spins briefly, without
        // priority inheritance.
        .target(name: "CBraidLock", path: "Sources/CBraidLock"),
        // Sans-IO message framing (TLV, and the Coder formats over it): bytes in any pieces in,
        // whole messages out. Foundation only, so the fuzz harness compiles it with swiftc alone.
        .target(name: "BraidFramers", path: "Sources/BraidFramers"),
        // The sans-IO TLS engine (GnuTLS over memory buffers, for TLS over TCP) and the GnuTLS
        // pieces both engines share: credentials, certificate checks, ALPN, anti-replay.
        .target(name: "BraidTLS", dependencies: ["BraidCore", "CBraid"], path: "Sources/BraidTLS"),
        // Apple's Security names (SecTrust, SecCertificate, SecKey, sec_trust_t) over GnuTLS:
        // what TLS verify blocks and certificate pinning code are written against.
        .target(name: "BraidSecurity", dependencies: ["BraidCore", "CBraid"], path: "Sources/BraidSecurity"),
        // The sans-IO QUIC engine: no sockets, no clock reads, no threads.
        .target(
            name: "BraidQUIC",
            dependencies: [
                "BraidCore",
                "BraidTLS",
                "CBraid",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidQUIC"
        ),
        // The sans-IO HTTP/3 engine over nghttp3: stream bytes in, stream bytes, events and
        // transport actions out. No sockets, clocks or threads; no QUIC either (the caller's
        // glue feeds it a QUIC connection's streams).
        .target(name: "BraidHTTP3", dependencies: ["BraidCore", "CBraid"], path: "Sources/BraidHTTP3"),
        // C helpers for the datapath: UDP control messages (GSO, GRO, ECN, PKTINFO), epoll, accept4.
        .target(name: "CBraidUDP", path: "Sources/CBraidUDP"),
        // The datapath's spine, for every stack and no engine: epoll event loops with timers,
        // batched UDP sockets, TCP sockets and listeners, the queues between callers and loops,
        // rtnetlink, the channel protocol, and the channels that need no engine: UDP's, and the
        // byte-stream channel of TCP, which runs a layer (TLS) through a protocol of its own.
        .target(
            name: "BraidIO",
            dependencies: [
                "BraidCore",
                "CBraidUDP",
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidIO"
        ),
        // QUIC on the datapath: the QUIC engine's channel, client and server drivers, server group.
        .target(
            name: "BraidQUICIO",
            dependencies: [
                "BraidIO",
                "BraidQUIC",
                "CBraidUDP",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidQUICIO"
        ),
        // HTTP/3 on the datapath: the HTTP/3 engine over a QUIC channel's streams.
        .target(
            name: "BraidHTTP3IO",
            dependencies: [
                "BraidCore",
                "BraidIO",
                "BraidQUIC",
                "BraidQUICIO",
                "BraidHTTP3",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidHTTP3IO"
        ),
        // TLS on the datapath: the TLS engine as a layer a byte-stream channel runs over its
        // socket.
        .target(name: "BraidTLSIO", dependencies: ["BraidCore", "BraidIO", "BraidTLS"], path: "Sources/BraidTLSIO"),
        // The sans-IO WebSocket engine (RFC 6455): the upgrade handshake, frames, masking,
        // reassembly, UTF-8 and size checks, the close handshake. GnuTLS only for SHA-1 and
        // mask randomness.
        .target(name: "BraidWebSocket", dependencies: ["CBraid"], path: "Sources/BraidWebSocket"),
        // WebSocket on the datapath: the engine as a layer a byte-stream channel runs, over TLS's
        // layer or over plain TCP.
        .target(name: "BraidWebSocketIO", dependencies: ["BraidCore", "BraidIO", "BraidWebSocket"], path: "Sources/BraidWebSocketIO"),
        // The sans-IO mDNS/DNS-SD engine (RFC 1035 wire format, RFC 6762, RFC 6763): messages
        // in, messages and deadlines out. No dependencies, so the fuzz harness compiles it with
        // swiftc alone.
        .target(name: "BraidDiscovery", path: "Sources/BraidDiscovery"),
        // mDNS on the datapath: the multicast sockets and the discovery engines on a loop, and
        // the other back end, the system's avahi-daemon over D-Bus.
        .target(
            name: "BraidDiscoveryIO",
            dependencies: ["BraidCore", "BraidIO", "BraidDiscovery", "CBraidUDP", "CBraidAvahi"],
            path: "Sources/BraidDiscoveryIO"),
        // The Avahi client library (libavahi-client). Not through pkg-config: its flags carry
        // -D_REENTRANT, which SwiftPM rejects with a warning; the headers are in /usr/include.
        .systemLibrary(name: "CBraidAvahi", path: "Sources/CBraidAvahi", providers: [.apt(["libavahi-client-dev"])]),
        // The public API: Network.framework's names (NetworkConnection, QUIC, NetworkListener).
        .target(
            name: "Braid",
            dependencies: [
                "BraidCore",
                "BraidQUIC",
                "BraidTLS",
                "BraidIO",
                "BraidQUICIO",
                "BraidHTTP3IO",
                "BraidTLSIO",
                "BraidHTTP3",
                "BraidFramers",
                "BraidSecurity",
                "BraidWebSocket",
                "BraidWebSocketIO",
                "BraidDiscovery",
                "BraidDiscoveryIO",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Sources/Braid"
        ),
        // A listener as a ServiceLifecycle `Service`: graceful shutdown closes its connections.
        .target(
            name: "BraidServiceLifecycle",
            dependencies: ["Braid", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            path: "Sources/BraidServiceLifecycle"),
        // The perf exchange (request a size, receive that many pattern bytes) over the engine.
        // The perf and echo applications, over the engine and over the public API.
        .target(name: "BraidPerf", dependencies: ["Braid", "BraidCore", "BraidQUIC"], path: "Sources/BraidPerf"),
        // The `braid` command-line tool: serve and drive the perf and echo applications.
        .executableTarget(
            name: "braid",
            dependencies: [
                "Braid", "BraidIO", "BraidPerf", "BraidQUIC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "BraidServiceLifecycle", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/braid"
        ),
        // The benchmark suite; the same binary plays each scenario's client and server roles.
        .executableTarget(
            name: "benchmarks",
            dependencies: [
                "Braid", "BraidQUIC", "BraidTLS", "BraidIO", "BraidPerf", "CBraid",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Benchmarks",
            // The latest runs' figures (tools/benchmark-results.py writes the page from their JSON).
            exclude: ["RESULTS.md", "RESULTS-1.json", "RESULTS-2.json", "RESULTS-3.json"]
        ),
        .testTarget(
            name: "BraidTests",
            dependencies: [
                "Braid", "BraidCore", "BraidQUIC", "BraidTLS", "BraidIO", "BraidQUICIO", "BraidHTTP3IO", "BraidTLSIO", "BraidPerf",
                "BraidFramers", "BraidWebSocket", "BraidWebSocketIO", "BraidHTTP3", "BraidSecurity", "CBraid", "CBraidUDP",
                "BraidDiscovery", "BraidDiscoveryIO",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                "BraidServiceLifecycle", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            path: "Tests/BraidTests",
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Every module a file uses is imported by that file, not reached through another import.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility")]
}
