// swift-tools-version: 6.0
// Licensed under the Apache License, Version 2.0; see LICENSE.
import PackageDescription

// PushRelayKit on its own: the package an app adds. Nothing of the relay comes with it. Its one
// dependency is swift-crypto, for encrypted pushes, built on Linux only: on Apple platforms the
// library uses CryptoKit and nothing is built besides it, although SwiftPM still resolves (clones)
// swift-crypto and the swift-asn1 it depends on. The relay's own Package.swift builds the same
// sources for its tests (see the repository's README).
let package = Package(
    name: "PushRelayKit",
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "PushRelayKit", targets: ["PushRelayKit"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0")
    ],
    targets: [
        .target(
            name: "PushRelayKit",
            dependencies: [.product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: [.linux]))],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
        ),
        .testTarget(
            name: "PushRelayKitTests",
            dependencies: ["PushRelayKit", .product(name: "Crypto", package: "swift-crypto", condition: .when(platforms: [.linux]))]
        ),
    ]
)
