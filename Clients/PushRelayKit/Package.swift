// swift-tools-version: 6.0
// Licensed under the Apache License, Version 2.0; see LICENSE.
import PackageDescription

// PushRelayKit on its own: the package an app adds. Foundation only, no dependency, so adding it
// fetches and builds nothing of the relay. The relay's own Package.swift builds the same sources
// for its tests (see the repository's README).
let package = Package(
    name: "PushRelayKit",
    platforms: [.iOS(.v16), .macOS(.v13), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .library(name: "PushRelayKit", targets: ["PushRelayKit"])
    ],
    targets: [
        .target(
            name: "PushRelayKit",
            swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
        ),
        .testTarget(name: "PushRelayKitTests", dependencies: ["PushRelayKit"]),
    ]
)
