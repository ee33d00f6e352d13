import Darkroom
import DarkroomTesting
import Foundation
import Testing

/// One row of the shared corpus manifest.
struct CorpusEntry: Sendable, CustomTestStringConvertible {
  var path: String
  var format: String
  var width: Int?
  var height: Int?
  var orientation: Int?
  var expected: String
  var testDescription: String { "\(path) [\(expected)]" }

  /// The corpus folder: $DARKROOM_CORPUS or ../shared/corpus beside the package.
  static var directory: String {
    if let configured = ProcessInfo.processInfo.environment["DARKROOM_CORPUS"], !configured.isEmpty { return configured }
    let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    return package.deletingLastPathComponent().appendingPathComponent("shared/corpus").path
  }

  static let all: [CorpusEntry] = {
    let manifest = (directory as NSString).appendingPathComponent("MANIFEST.tsv")
    guard let text = try? String(contentsOfFile: manifest, encoding: .utf8) else { return [] }
    var lines = text.split(separator: "\n", omittingEmptySubsequences: true).map {
      $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    }
    guard let header = lines.first else { return [] }
    lines.removeFirst()
    func column(_ name: String) -> Int { header.firstIndex(of: name) ?? 0 }
    let (path, format, width, height, orientation, expected) = (
      column("path"), column("format"), column("width"), column("height"), column("orientation"), column("expected")
    )
    return lines.filter { $0.count > expected }.map {
      CorpusEntry(
        path: $0[path], format: $0[format], width: Int($0[width]), height: Int($0[height]), orientation: Int($0[orientation]),
        expected: $0[expected])
    }
  }()
}

@Suite("Shared corpus")
struct CorpusTests {
  static let strict = Pipeline(name: "corpus-strict") {
    Fetcher()
    ImageDecoder()
    Resizer(width: 64, height: 64, mode: .fit)
    ImageEncoder(.png())
  }
  static let lenient = Pipeline(name: "corpus-lenient") {
    Fetcher()
    ImageDecoder(lenient: true)
    Resizer(width: 64, height: 64, mode: .fit)
    ImageEncoder(.png())
  }

  @Test("the manifest is there and complete")
  func manifestPresent() {
    #expect(CorpusEntry.all.count >= 200, "corpus not found at \(CorpusEntry.directory); set DARKROOM_CORPUS")
  }

  @Test("every corpus file ends as its manifest says, in time", arguments: CorpusEntry.all)
  func corpusFile(_ entry: CorpusEntry) async throws {
    let path = (CorpusEntry.directory as NSString).appendingPathComponent(entry.path)
    let source = ImageSource(path: path)
    // "In time": the file ends by itself, not by the time limit. The limit is generous because it
    // also covers waiting for a pool thread behind the other files (all start at once; under a
    // sanitizer on two cores the queue alone can take half a minute).
    let result = await Self.strict.run(source, options: RunOptions(timeout: .seconds(120))).result
    if case .failure(let error) = result { #expect(error.code != .timedOut, "\(entry.path) did not end by itself: \(error)") }

    switch entry.expected {
    case "decode", "decode-tolerant", "decode-autorotate":
      guard case .success(let image) = result else {
        Issue.record("expected to decode, got \(result)")
        return
      }
      #expect(max(image.width, image.height) <= 64)
      #expect(!image.partial)
      if entry.expected == "decode-autorotate", let width = entry.width, let height = entry.height, width != height,
        let orientation = entry.orientation
      {
        // Upright: the long side of the output matches the long side of the upright source.
        let uprightLandscape = (orientation >= 5) ? height > width : width > height
        #expect((image.width > image.height) == uprightLandscape, "not upright: \(image.width)×\(image.height)")
      }
    case "reject":
      guard case .failure(let error) = result else {
        Issue.record("expected a rejection, got an image")
        return
      }
      #expect([.corruptImage, .unsupportedFormat, .imageTooLarge].contains(error.code), "\(error)")
      #expect(!error.message.isEmpty)
    case "reject-unsupported":
      guard case .failure(let error) = result else {
        Issue.record("expected unsupportedFormat, got an image")
        return
      }
      #expect(error.code == .unsupportedFormat, "\(error)")
    case "reject-limit":
      guard case .failure(let error) = result else {
        Issue.record("expected imageTooLarge, got an image")
        return
      }
      #expect(error.code == .imageTooLarge, "\(error)")
      // Refused from the header: the message names the declared size (or the decoder's own limit),
      // so no pixel was decoded. (Timing is left to benchmarks; the 30 s bound above catches hangs.)
      #expect(error.message.contains("declares") || error.message.contains("larger than its decoder accepts"), "\(error.message)")
    case "reject-or-partial":
      guard case .failure(let error) = result else {
        Issue.record("strict decoding accepted damaged data")
        return
      }
      #expect(error.code == .corruptImage, "\(error)")
      let relaxed = await Self.lenient.run(source, options: RunOptions(timeout: .seconds(30))).result
      if case .success(let image) = relaxed {
        #expect(image.partial, "lenient decoding must flag the partial image")
      }
    case "no-crash":
      if case .failure(let error) = result {
        #expect(error.code != .stageFailed, "\(error)")
      }
    default:
      Issue.record("unknown expectation \(entry.expected)")
    }
  }

  @Test("EXIF orientation examples all come out like the upright original")
  func orientationExamples() async throws {
    let folder = (CorpusEntry.directory as NSString).appendingPathComponent("exif-orientation-examples")
    let pipeline = Pipeline(name: "orient") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 90, height: 90, mode: .fit)
      ImageEncoder(.png())
    }
    for kind in ["Landscape", "Portrait"] {
      let reference = try decodeMaterialized(try await pipeline.process(ImageSource(path: "\(folder)/\(kind)_1.jpg")))
      let names = (try FileManager.default.contentsOfDirectory(atPath: folder)).filter {
        $0.hasPrefix(kind + "_") && !$0.hasSuffix("_1.jpg")
      }
      #expect(!names.isEmpty)
      for name in names {
        let image = try decodeMaterialized(try await pipeline.process(ImageSource(path: "\(folder)/\(name)")))
        let sameSize = image.width == reference.width && image.height == reference.height
        #expect(sameSize, "\(name): \(image.width)×\(image.height)")
        #expect(try meanDifference(image.image, reference.image) < 12, "\(name) is not upright")
      }
    }
  }

  func decodeMaterialized(_ encoded: EncodedImage) throws -> DecodedImage {
    let decoded = try ImageDecoder(autoRotate: false).decode(FetchedData(source: encoded.source, bytes: encoded.bytes))
    return decoded.with(try decoded.image.materialized())
  }

  func meanDifference(_ a: VipsImage, _ b: VipsImage) throws -> Double {
    let x = try a.pixelBytes()
    let y = try b.pixelBytes()
    guard x.count == y.count, !x.isEmpty else { return .infinity }
    return Double(zip(x, y).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }) / Double(x.count)
  }
}

@Suite("README")
struct ReadmeExampleTests {
  @Test("the README's Swift example works as written")
  func readmeExample() async throws {
    try Darkroom.bootstrap()
    let thumbnail = Pipeline(name: "thumbnail") {
      Fetcher()
      ImageDecoder()
      Resizer(width: 300, height: 300, mode: .fit)
      ImageEncoder(.jpeg(quality: 80))
    }
    let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
      .appendingPathComponent("Examples/images/dunes.jpg").path
    let image = try await thumbnail.run(ImageSource(examples)).value
    #expect(image.format == .jpeg)
    #expect(image.width == 300 && image.height == 200)
    let path = NSTemporaryDirectory() + "dunes-300-\(UUID().uuidString).\(image.format.fileExtension)"
    try image.bytes.data.write(to: URL(fileURLWithPath: path))
    defer { try? FileManager.default.removeItem(atPath: path) }
    #expect(FileManager.default.fileExists(atPath: path))
  }
}
