import DarkroomCore
import DarkroomHTTP
import Foundation
import Testing

/// thumbor's own signer, libthumbor (from PyPI), as the oracle: URLs it builds for a thumbor
/// server must parse to what it was asked for and carry signatures we verify.
enum Libthumbor {
  static let available: Bool = (try? run("import libthumbor")) != nil

  /// Runs Python code and returns its standard output.
  static func run(_ code: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", code]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw CocoaError(.executableLoad) }
    return String(decoding: data, as: UTF8.self)
  }

  /// The URL libthumbor generates with `key` for keyword arguments written in Python.
  static func url(key: String, _ arguments: String) throws -> String {
    try run(
      "from libthumbor import CryptoURL\nprint(CryptoURL(key=\(key.debugDescription)).generate(\(arguments)))"
    ).trimmingCharacters(in: .whitespacesAndNewlines)
  }
}

@Suite("thumbor URLs")
struct ThumborURLTests {
  @Test("every part of the grammar, in order")
  func fullGrammar() throws {
    let url = try ThumborURL(
      path: "/unsafe/trim/10x20:310x220/fit-in/-300x-200/left/top/smart/filters:quality(80):fill(blue,1)/example.com/a%20b.jpg")
    #expect(url.signature == nil)
    #expect(url.trim)
    #expect(url.crop?.left == 10 && url.crop?.top == 20 && url.crop?.right == 310 && url.crop?.bottom == 220)
    #expect(url.fit == .fitIn)
    #expect(url.width == 300 && url.height == 200 && url.flipHorizontally && url.flipVertically)
    #expect(url.horizontalAlignment == "left" && url.verticalAlignment == "top" && url.smart)
    #expect(url.filters.map(\.name) == ["quality", "fill"])
    #expect(url.filters.last?.arguments == ["blue", "1"])
    #expect(url.image == "example.com/a b.jpg")
  }

  @Test("the image keeps its own slashes, and a filter argument may be a URL")
  func imagesAndFilterURLs() throws {
    let url = try ThumborURL(
      path: "/unsafe/200x0/filters:watermark(http://cdn.example/w.png,10,-10,50)/http%3A%2F%2Fimages.example%2Fx%2Fy.png")
    #expect(url.width == 200 && url.height == 0)
    #expect(url.filters == [ThumborURL.Filter(name: "watermark", arguments: ["http://cdn.example/w.png", "10", "-10", "50"])])
    #expect(url.image == "http://images.example/x/y.png")
    #expect(try ThumborURL(path: "/unsafe/images.example/a/b.jpg").image == "images.example/a/b.jpg")
  }

  @Test(
    "bad paths are invalidInput, naming what is wrong",
    arguments: [
      "unsafe/a.jpg", "/unsafe", "/unsafe/", "/unsafe/300x200/", "/unsafe/99999999x1/a.jpg", "/unsafe/70000x10/a.jpg",
      "/unsafe/filters:quality(80/a.jpg", "/unsafe/filters:qu ality(80)/a.jpg", "/unsafe/a%zz.jpg", "//a.jpg",
      "/unsafe/trim:middle/a.jpg", "/unsafe/trim:443/a.jpg", "/unsafe/trim:-1/a.jpg",
    ])
  func badPaths(_ path: String) {
    #expect(throws: PipelineError.self) { try ThumborURL(path: path) }
    do {
      _ = try ThumborURL(path: path)
    } catch {
      #expect(error.code == .invalidInput)
      #expect(error.message.hasPrefix("not a thumbor URL: "))
    }
  }

  @Test("a signature is refused when the path or the key differs, and unsafe is never signed")
  func tampering() throws {
    let signer = ThumborSignature(key: "secret")
    let path = "300x200/smart/example.com/a.jpg"
    let signed = try ThumborURL(path: "/" + signer.sign(path) + "/" + path)
    #expect(signer.verify(signed))
    #expect(!ThumborSignature(key: "other").verify(signed))
    let moved = try ThumborURL(path: "/" + signer.sign(path) + "/301x200/smart/example.com/a.jpg")
    #expect(!signer.verify(moved))
    #expect(!signer.verify(try ThumborURL(path: "/unsafe/" + path)))
  }

  @Test(
    "URLs built by libthumbor parse to what it was asked for, and their signatures verify",
    .enabled(if: Libthumbor.available, "libthumbor is not installed (pip install libthumbor; .ci/run does)"),
    arguments: [
      ("width=300, height=200, smart=True", 300, 200, ThumborURL.Fit.fill, true),
      ("width=64, height=64, fit_in=True", 64, 64, .fitIn, false),
      ("width=640, height=480, adaptive_fit_in=True", 640, 480, .adaptiveFitIn, false),
      ("width=100, height=0, full_fit_in=True", 100, 0, .fullFitIn, false),
      ("width=120, height=80, flip=True, flop=True, halign='right', valign='bottom'", 120, 80, .fill, false),
      ("width=50, height=50, crop=((1, 2), (301, 202)), trim=True", 50, 50, .fill, false),
      ("width=320, height=0, filters=['quality(80)', 'fill(ff0000)', 'format(webp)']", 320, 0, .fill, false),
    ])
  func libthumborOracle(_ options: String, width: Int, height: Int, fit: ThumborURL.Fit, smart: Bool) throws {
    let key = "the server's key ü"
    let generated = try Libthumbor.url(key: key, options + ", image_url='images.example/photos/a b.jpg'")
    let url = try ThumborURL(path: generated)
    #expect(ThumborSignature(key: key).verify(url), "\(generated)")
    #expect(!ThumborSignature(key: key + "!").verify(url))
    #expect(url.width == width && url.height == height && url.fit == fit && url.smart == smart, "\(generated)")
    #expect(url.image == "images.example/photos/a b.jpg", "\(generated)")
    if options.contains("flop") { #expect(url.flipHorizontally && url.flipVertically && url.horizontalAlignment == "right") }
    if options.contains("crop=") { #expect(url.trim && url.crop?.right == 301 && url.crop?.bottom == 202) }
    if options.contains("filters") { #expect(url.filters.map(\.name) == ["quality", "fill", "format"]) }
  }
}
