// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Braid",
    products: [
        .library(name: "BraidQUIC", targets: ["BraidQUIC"]),
        .executable(name: "benchmarks", targets: ["benchmarks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
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
            ]
        ),
        // The sans-IO QUIC engine: no sockets, no clock reads, no threads.
        .target(
            name: "BraidQUIC",
            dependencies: [
                "CBraid",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/BraidQUIC"
        ),
        .executableTarget(
            name: "benchmarks",
            dependencies: ["BraidQUIC"],
            path: "Benchmarks"
        ),
        .testTarget(
            name: "BraidQUICTests",
            dependencies: ["BraidQUIC", "CBraid"],
            path: "Tests/BraidQUICTests",
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
