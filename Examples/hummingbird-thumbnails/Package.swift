// swift-tools-version: 6.1
// A Hummingbird 2 server that serves thumbnails through an ImageLoader (Darkroom's getting-started
// article "Serving thumbnails with Hummingbird"). Not built by CI: `swift build` in this folder.
import PackageDescription

let package = Package(
  name: "hummingbird-thumbnails",
  platforms: [.macOS(.v15)],
  dependencies: [
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(name: "Darkroom", path: "../.."),
  ],
  targets: [
    .executableTarget(
      name: "ThumbnailServer",
      dependencies: [
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Darkroom", package: "Darkroom"),
      ],
      swiftSettings: [.swiftLanguageMode(.v6)]
    )
  ]
)
