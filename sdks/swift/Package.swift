// swift-tools-version:6.0
// Fenec's Swift SDK: for now the transport tools/sdkgen generates from
// openapi.yaml (Sources/FenecDB/Transport.swift); Foundation only.
import PackageDescription

let package = Package(
    name: "FenecDB",
    platforms: [.macOS(.v12), .iOS(.v15), .tvOS(.v15), .watchOS(.v8)],
    products: [
        .library(name: "FenecDB", targets: ["FenecDB"]),
    ],
    targets: [
        .target(name: "FenecDB", path: "Sources/FenecDB"),
    ]
)
