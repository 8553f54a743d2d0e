// swift-tools-version: 6.2
// Licensed under the Apache License, Version 2.0; see LICENSE.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// What both of the application's test targets use.
let relayTestDependencies: [Target.Dependency] = [
    "PushRelay",
    "StrictJSON",
    "CurlHTTP2",
    "PushSandbox",
    "Postgres",
    "TestSupport",
    "PushRelayKit",
    .product(name: "HummingbirdTesting", package: "hummingbird"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "JWTKit", package: "jwt-kit"),
    .product(name: "Yams", package: "Yams"),
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "_CryptoExtras", package: "swift-crypto"),
]

let package = Package(
    name: "push-relay",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "push-relay", targets: ["push-relay"]),
        .executable(name: "push-relay-bench", targets: ["push-relay-bench"]),
        .library(name: "PushRelay", targets: ["PushRelay"]),
        .library(name: "Postgres", targets: ["Postgres"]),
        .library(name: "CurlHTTP2", targets: ["CurlHTTP2"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/jpsim/Yams.git", "5.4.0"..<"7.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.15.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.45.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
    ],
    targets: [
        // System libraries.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .systemLibrary(
            name: "CLibCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        // jemalloc, linked into push-relay and push-relay-bench so it serves every malloc there.
        .systemLibrary(
            name: "CJemalloc",
            pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"]), .brew(["jemalloc"])]
        ),
        // The commit a release build was made from (Deploy/release.sh defines it).
        .target(name: "CBuildInfo"),
        // Whether a descriptor is the journal stream systemd names (JournalPriority).
        .target(name: "CJournalStream"),
        // push-relay's setpriority: libdispatch's refused nice values are not errors (thread_nice.c).
        .target(name: "CThreadNice"),
        // Typed wrappers for libcurl's variadic functions.
        .target(name: "CCurlShim", dependencies: ["CLibCurl"], linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),

        // Transport layers: know nothing of PushRelay.
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CurlHTTP2",
            dependencies: ["CCurlShim", "CLibCurl"],
            swiftSettings: swiftSettings
        ),

        // A local APNs stand-in over HTTP/2 and TLS, for tests, benchmarks and the demo run.
        .target(
            name: "PushSandbox",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // A strict RFC 8259 JSON parser over bytes; independent of the application.
        .target(name: "StrictJSON", swiftSettings: swiftSettings),

        // The application.
        .target(
            name: "PushRelay",
            dependencies: [
                "CBuildInfo",
                "CJournalStream",
                "Postgres",
                "CurlHTTP2",
                "StrictJSON",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["EmbedAssets"]
        ),
        .executableTarget(
            name: "push-relay",
            dependencies: [
                "CJemalloc",
                "CThreadNice",
                "PushRelay",
                "PushSandbox",
                "CurlHTTP2",
                "Postgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // Compiles the app's text assets (OpenAPI document, console templates, stylesheet, script)
        // into the binary; see Plugins/EmbedAssets.
        .plugin(name: "EmbedAssets", capability: .buildTool(), dependencies: ["EmbedAssetsTool"]),
        .executableTarget(name: "EmbedAssetsTool", path: "Plugins/EmbedAssetsTool", swiftSettings: swiftSettings),

        // Load generator for the benchmarks; kept out of the server binary.
        .executableTarget(
            name: "push-relay-bench",
            dependencies: [
                "CJemalloc",
                "CurlHTTP2",
                "PushSandbox",
                "Postgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),

        // The client library for iOS (and macOS, Linux) apps: device registration, the unread
        // counter and encrypted pushes. Apps add the package of its own in Clients/PushRelayKit,
        // which builds nothing else on Apple platforms (CryptoKit) and swift-crypto on Linux;
        // these targets build the same sources for the project's tests.
        .target(
            name: "PushRelayKit",
            dependencies: [.product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: [.linux]))],
            path: "Clients/PushRelayKit/Sources/PushRelayKit",
            swiftSettings: swiftSettings
        ),
        // PushRelayKit's example: two devices, a user switch, against a running relay.
        .executableTarget(
            name: "push-relay-kit-example",
            dependencies: [
                "PushRelayKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),

        // Real PostgreSQL servers for the test suites.
        .target(
            name: "TestSupport",
            dependencies: ["Postgres", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "StrictJSONTests", dependencies: ["StrictJSON", "TestSupport"]),
        // PushRelayKit without a relay (parsing, badges, the event-stream reader); the suites
        // against a running relay are in IntegrationTests/Client.
        .testTarget(
            name: "PushRelayKitTests",
            dependencies: ["PushRelayKit", .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: [.linux]))],
            path: "Clients/PushRelayKit/Tests/PushRelayKitTests"
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", "TestSupport"]
        ),
        .testTarget(
            name: "CurlHTTP2Tests",
            dependencies: [
                "CurlHTTP2",
                "PushSandbox",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Unit tests, without I/O beyond the repository's files.
        .testTarget(name: "PushRelayTests", dependencies: relayTestDependencies),
        // Suites that start PostgreSQL (and the sandbox, relay processes).
        .testTarget(name: "IntegrationTests", dependencies: relayTestDependencies),
    ]
)
