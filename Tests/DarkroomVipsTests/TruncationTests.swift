import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A large local file that another process truncates while it is decoded must fail (or decode),
/// never kill the process: libvips must never have mapped it (a mapped page past the new end of
/// the file raises SIGBUS), and no library may abort on it.
///
/// Each case runs in a child process (this test binary again, running only ``childDecode()``),
/// so a signal is observed instead of taking the whole suite down.
@Suite("Files truncated during their decode", .serialized)
struct TruncationTests {
  static let childVariable = "DARKROOM_TRUNCATION_CHILD"

  enum Fixture: String, CaseIterable, Sendable {
    case webp, gif, jpeg, png, tiff, avif
  }

  /// Noise, so no format compresses the image below the 1 MiB streaming threshold.
  static func noise(width: Int, height: Int) -> [UInt8] {
    var generator = SplitMix(seed: 11)
    var pixels = [UInt8](repeating: 0, count: width * height * 3)
    for index in pixels.indices { pixels[index] = UInt8(truncatingIfNeeded: generator.next()) }
    return pixels
  }

  static func encoded(_ fixture: Fixture) throws -> ImageBytes {
    let (width, height) = (1200, 1000)
    let pixels = noise(width: width, height: height)
    let format: EncodeFormat
    switch fixture {
    case .webp: format = .webp(lossless: true, effort: 0)
    case .gif: format = .gif(effort: 1)
    case .jpeg: format = .jpeg(quality: 95)
    case .png: format = .png(compression: 0)
    case .avif: format = .avif(quality: 95, effort: 0)
    case .tiff: return ImageBytes(uncompressedTIFF(pixels, width: width, height: height))
    }
    let image = try VipsImage.fromPixels(pixels, width: width, height: height, bands: 3)
    let decoded = DecodedImage(
      source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: width, sourceHeight: height)
    return try ImageEncoder(format).encode(decoded).bytes
  }

  /// A baseline RGB TIFF, uncompressed, 16 rows per strip (Darkroom encodes no TIFF).
  static func uncompressedTIFF(_ pixels: [UInt8], width: Int, height: Int) -> [UInt8] {
    let rowsPerStrip = 16
    let strips = (height + rowsPerStrip - 1) / rowsPerStrip
    let rowBytes = width * 3
    var out: [UInt8] = []
    func u16(_ value: Int) { out += [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
    func u32(_ value: Int) { out += (0..<4).map { UInt8(value >> ($0 * 8) & 0xFF) } }
    let entries = 9
    let ifdOffset = 8
    let extra = ifdOffset + 2 + entries * 12 + 4  // BitsPerSample, StripOffsets, StripByteCounts
    let offsetsAt = extra + 6
    let countsAt = offsetsAt + strips * 4
    let dataAt = countsAt + strips * 4
    out += [0x49, 0x49, 42, 0]
    u32(ifdOffset)
    u16(entries)
    func entry(_ tag: Int, _ type: Int, _ count: Int, _ value: Int) {
      u16(tag)
      u16(type)
      u32(count)
      if type == 3, count == 1 {
        u16(value)
        u16(0)
      } else {
        u32(value)
      }
    }
    entry(256, 4, 1, width)
    entry(257, 4, 1, height)
    entry(258, 3, 3, extra)
    entry(259, 3, 1, 1)
    entry(262, 3, 1, 2)
    entry(273, 4, strips, offsetsAt)
    entry(277, 3, 1, 3)
    entry(278, 4, 1, rowsPerStrip)
    entry(279, 4, strips, countsAt)
    u32(0)
    u16(8)
    u16(8)
    u16(8)
    for strip in 0..<strips { u32(dataAt + strip * rowsPerStrip * rowBytes) }
    for strip in 0..<strips { u32(min(rowsPerStrip, height - strip * rowsPerStrip) * rowBytes) }
    out += pixels
    return out
  }

  @Test(
    "a large file truncated during its decode fails with a typed error or decodes; the process survives",
    arguments: Fixture.allCases)
  func truncatedDuringDecode(_ fixture: Fixture) throws {
    let folder = NSTemporaryDirectory() + "darkroom-truncation-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let bytes = try Self.encoded(fixture)
    #expect(bytes.count >= FileTransport.streamingThreshold, "\(fixture) fixture is only \(bytes.count) bytes")
    let original = try TestImages.write(bytes, named: "original.\(fixture.rawValue)", in: folder)

    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    process.arguments = ["--testing-library", "swift-testing", "--filter", "TruncationTests/childDecode"]
    process.environment = ProcessInfo.processInfo.environment.merging([Self.childVariable: original]) { $1 }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    let results = text.split(separator: "\n").filter { $0.hasPrefix("TRUNCATION ") }
    #expect(
      process.terminationReason == .exit && process.terminationStatus == 0,
      "the child decoding \(fixture) ended by \(process.terminationReason == .uncaughtSignal ? "signal" : "exit") \(process.terminationStatus):\n\(text.suffix(3000))"
    )
    #expect(results.count == 6, "\(text.suffix(3000))")
    for line in results {
      #expect(!line.contains(" mapped"), "\(line)")
      #expect(line.hasSuffix(" decoded") || line.hasSuffix(" corruptImage") || line.hasSuffix(" unsupportedFormat"), "\(line)")
    }
    print(results.joined(separator: "\n"))
  }

  /// Runs only in the child process started above: decodes the file named by the environment,
  /// cutting a fresh copy short at several lengths, before the header is read and after it (the
  /// pixels are decoded later, when the lazy image is materialised).
  @Test("(child process only) decode a copy of a file cut short while it is decoded")
  func childDecode() async throws {
    guard let original = ProcessInfo.processInfo.environment[Self.childVariable] else { return }
    let whole = try Data(contentsOf: URL(fileURLWithPath: original))
    let path = original + ".work." + (original as NSString).pathExtension
    for afterHeader in [true, false] {
      for cut in [whole.count / 2, 1000, 0] {
        try whole.write(to: URL(fileURLWithPath: path))
        let fetched = try await StageHarness().run(Fetcher(), on: ImageSource(path: path))
        #expect(fetched.bytes.streamingDescriptor != nil)
        var outcome: String
        var mapped = ""
        do {
          if !afterHeader { #expect(truncate(path, off_t(cut)) == 0) }
          let decoded = try ImageDecoder().decode(fetched)
          if afterHeader {
            let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
            if maps.contains(path) { mapped = " mapped" }
            #expect(truncate(path, off_t(cut)) == 0)
          }
          _ = try decoded.image.materialized()
          outcome = "decoded"
        } catch {
          outcome = "\(error.code)"  // the decoder throws only PipelineError
        }
        print("TRUNCATION \(original) afterHeader=\(afterHeader) cut=\(cut)\(mapped) \(outcome)")
      }
    }
  }
}
