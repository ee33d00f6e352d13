// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
  name: "Darkroom",
  platforms: [.macOS(.v15)],
  products: [
    .library(name: "Darkroom", targets: ["Darkroom"]),
    .library(name: "DarkroomCore", targets: ["DarkroomCore"]),
    .library(name: "DarkroomVips", targets: ["DarkroomVips"]),
    .library(name: "DarkroomCache", targets: ["DarkroomCache"]),
    .library(name: "DarkroomTesting", targets: ["DarkroomTesting"]),
    .library(name: "DarkroomVipsTesting", targets: ["DarkroomVipsTesting"]),
    .library(name: "DarkroomHTTP", targets: ["DarkroomHTTP"]),
    .library(name: "DarkroomPostgres", targets: ["DarkroomPostgres"]),
    .executable(name: "darkroom", targets: ["DarkroomCLI"]),
    .plugin(name: "ValidatePipelines", targets: ["ValidatePipelines"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
    .package(url: "https://github.com/apple/swift-nio-extras", from: "1.24.0"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    // Test support only (issue 17): the TLS and HTTP/2 loopback server and its in-process certificates.
    .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
    .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
  ],
  targets: [
    // libvips' headers (Debian's libvips-dev), compiled against but not linked: CVipsShim opens
    // libvips on first use (see Sources/CVipsShim/library.h), so the process links only GLib.
    .systemLibrary(
      name: "CVips",
      pkgConfig: "gobject-2.0",
      providers: [.apt(["libvips-dev"])]
    ),
    // dlopen and dlsym for the shims below, which open their libraries on first use; and the
    // program's own read-only pages let go after start-up (DarkroomCore's ProgramPages).
    .target(name: "CLibraryLoader"),
    .target(
      name: "CVipsShim", dependencies: ["CVips", "CLibraryLoader"],
      linkerSettings: [.linkedLibrary("z"), .linkedLibrary("gmodule-2.0")]),
    // libcurl's headers (Debian's libcurl4-openssl-dev, on the default include path), compiled
    // against but not linked: CCurlShim opens libcurl on the first HTTP transfer.
    .systemLibrary(name: "CCurl"),
    .target(name: "CCurlShim", dependencies: ["CCurl", "CLibraryLoader"]),
    .target(
      name: "DarkroomCurl",
      dependencies: ["DarkroomCore", "CCurl", "CCurlShim", .product(name: "DequeModule", package: "swift-collections")],
      swiftSettings: strict),
    // openat2(2) for FileTransport (syscall(2) is variadic, so Swift cannot call it).
    .systemLibrary(name: "CFileShim"),
    .target(
      name: "DarkroomCore",
      dependencies: [
        "CFileShim", "CLibraryLoader", .product(name: "HeapModule", package: "swift-collections"),
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: strict),
    .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
    .target(
      name: "DarkroomCache",
      dependencies: [
        "DarkroomCore", "CZlib", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
      ],
      swiftSettings: strict
    ),
    .target(name: "DarkroomVips", dependencies: ["DarkroomCore", "CVips", "CVipsShim"], swiftSettings: strict),
    // The image server (issue 15): thumbor URLs and signatures, presets, the result cache, admission
    // control and the Hummingbird routes that `darkroom serve` runs and an app can mount.
    .target(
      name: "DarkroomHTTP",
      dependencies: [
        "Darkroom", .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdCore", package: "hummingbird"),
        .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
        .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      swiftSettings: strict),
    // Scale-out (issue 16): the job queue and the shared result store on PostgreSQL (postgres-nio).
    .target(
      name: "DarkroomPostgres",
      dependencies: [
        "DarkroomCore", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ],
      swiftSettings: strict),
    .target(
      name: "Darkroom",
      dependencies: [
        "DarkroomCore", "DarkroomVips", "DarkroomCurl", "DarkroomCache", .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
      ], swiftSettings: strict),
    // The testing kit: fakes and the harness need Core only; images made with libvips are in DarkroomVipsTesting.
    .target(name: "DarkroomTesting", dependencies: ["DarkroomCore"], swiftSettings: strict),
    .target(name: "DarkroomVipsTesting", dependencies: ["Darkroom", "DarkroomTesting"], swiftSettings: strict),
    // The command-line runner: the target is DarkroomCLI (no two paths may differ only by case, and
    // Sources/Darkroom is the library), the executable product keeps the name `darkroom`.
    .executableTarget(
      name: "DarkroomCLI",
      dependencies: [
        "Darkroom", "DarkroomCurl", "DarkroomHTTP", "DarkroomPostgres",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      swiftSettings: strict
    ),
    .executableTarget(name: "darkroom-bench", dependencies: ["Darkroom"], swiftSettings: strict),
    // Fuzz harnesses (`make fuzz`); built normally it replays inputs through a harness.
    .executableTarget(name: "darkroom-fuzz", dependencies: ["Darkroom", "DarkroomHTTP"], swiftSettings: strict),
    .plugin(
      name: "ValidatePipelines",
      capability: .command(
        intent: .custom(verb: "validate-pipelines", description: "Validate every Darkroom pipeline JSON file in the package"),
        permissions: []
      )
      // No tool dependency: the plugin builds the `darkroom` product itself (see the plugin).
    ),
    .target(
      name: "DarkroomHTTPTestServer",
      dependencies: [
        .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "NIOHTTP2", package: "swift-nio-http2"),
        .product(name: "X509", package: "swift-certificates"),
        .product(name: "Crypto", package: "swift-crypto"),
      ],
      path: "Tests/Support/DarkroomHTTPTestServer",
      swiftSettings: strict
    ),
    .testTarget(
      name: "DarkroomCurlTests",
      dependencies: ["Darkroom", "DarkroomCurl", "DarkroomTesting", "DarkroomVipsTesting", "DarkroomHTTPTestServer"],
      swiftSettings: strict),
    .testTarget(name: "DarkroomCoreTests", dependencies: ["DarkroomCore", "DarkroomTesting"], swiftSettings: strict),
    .testTarget(
      name: "DarkroomHTTPTests",
      dependencies: [
        "DarkroomHTTP", "DarkroomTesting", "DarkroomVipsTesting", "DarkroomHTTPTestServer",
        .product(name: "HummingbirdTesting", package: "hummingbird"),
      ],
      swiftSettings: strict),
    // A real PostgreSQL cluster for the tests (initdb in a temporary folder, a Unix socket only).
    .target(
      name: "DarkroomPostgresTestServer",
      dependencies: [
        "DarkroomCore", "DarkroomPostgres", "CFileShim", .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Tests/Support/DarkroomPostgresTestServer", swiftSettings: strict),
    .testTarget(
      name: "DarkroomPostgresTests", dependencies: ["DarkroomPostgres", "DarkroomTesting", "DarkroomPostgresTestServer"],
      swiftSettings: strict),
    .testTarget(name: "DarkroomCacheTests", dependencies: ["DarkroomCache", "DarkroomTesting"], swiftSettings: strict),
    .testTarget(
      name: "DarkroomVipsTests", dependencies: ["Darkroom", "DarkroomTesting", "DarkroomVipsTesting", "CZlib"],
      swiftSettings: strict),
    .testTarget(
      name: "DarkroomTests",
      dependencies: [
        "Darkroom", "DarkroomTesting", "DarkroomVipsTesting", .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strict),
    .testTarget(
      name: "DarkroomCLITests",
      dependencies: [
        "Darkroom", "DarkroomHTTP", "DarkroomTesting", "DarkroomVipsTesting", "DarkroomHTTPTestServer", "CZlib", "DarkroomCLI",
        "DarkroomPostgresTestServer", "DarkroomPostgres",
        "darkroom-fuzz",
      ],
      swiftSettings: strict),
  ]
)
