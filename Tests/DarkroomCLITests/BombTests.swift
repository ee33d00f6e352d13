import CZlib
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The peak resident memory a runner reported in its summary ("…, peak RSS 92 MB"), in bytes.
/// (A parent's `wait4` cannot tell: on Linux a child spawned with vfork carries the parent's
/// high-water mark into its `ru_maxrss`, so a big test process would be counted.)
func reportedPeakRSS(_ run: Runner.Result) -> Int? {
  guard let range = run.stderr.range(of: "peak RSS ") else { return nil }
  return Int(run.stderr[range.upperBound...].prefix { $0.isNumber }).map { $0 << 20 }
}

/// PNG files made here: pixels of zeros compressed ~1000:1, and headers that lie.
enum HostilePNG {
  /// An 8-bit RGB or RGBA PNG of `width`×`height` zero pixels; `rows` limits how many rows the
  /// data really holds (a header that declares more than the file carries).
  static func zeros(width: Int, height: Int, alpha: Bool = true, rows: Int? = nil) throws -> Data {
    var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    var header = Data()
    for value in [UInt32(width), UInt32(height)] { header.append(contentsOf: bigEndian(value)) }
    header.append(contentsOf: [8, alpha ? 6 : 2, 0, 0, 0])  // 8 bits, RGB(A), deflate, no filter or interlace
    png.append(chunk("IHDR", header))
    png.append(chunk("IDAT", try deflatedZeros(rowBytes: 1 + width * (alpha ? 4 : 3), rows: rows ?? height)))
    png.append(chunk("IEND", Data()))
    return png
  }

  private static func deflatedZeros(rowBytes: Int, rows: Int) throws -> Data {
    var stream = z_stream()
    guard deflateInit_(&stream, 9, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
      throw POSIXError(.EINVAL)
    }
    defer { deflateEnd(&stream) }
    var row = [UInt8](repeating: 0, count: rowBytes)
    var output = [UInt8](repeating: 0, count: 1 << 16)
    var result = Data()
    for index in 0...rows {
      let last = index == rows
      try row.withUnsafeMutableBufferPointer { input in
        stream.next_in = input.baseAddress
        stream.avail_in = last ? 0 : UInt32(rowBytes)
        repeat {
          try output.withUnsafeMutableBufferPointer { out in
            stream.next_out = out.baseAddress
            stream.avail_out = UInt32(out.count)
            let code = deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH)
            guard code == Z_OK || code == Z_STREAM_END || code == Z_BUF_ERROR else { throw POSIXError(.EINVAL) }
            result.append(out.baseAddress!, count: out.count - Int(stream.avail_out))
          }
        } while stream.avail_out == 0 || (last && stream.avail_in > 0)
      }
    }
    return result
  }

  /// A 4×4 PNG whose `kind` chunk (before the pixel data) declares `declared` bytes but holds a
  /// few (its CRC is the real body's).
  static func lyingChunk(_ kind: String, declared: UInt32 = 0x7FFF_0000) throws -> Data {
    var png = try zeros(width: 4, height: 4)
    png.insert(contentsOf: chunk(kind, Data("key\0\0\0text".utf8), declared: declared), at: 33)
    return png
  }

  static func chunk(_ kind: String, _ body: Data, declared: UInt32? = nil) -> Data {
    var typed = Data(kind.utf8)
    typed.append(body)
    let crc = typed.withUnsafeBytes { UInt32(crc32(0, $0.bindMemory(to: Bytef.self).baseAddress, uInt($0.count))) }
    var out = Data(bigEndian(declared ?? UInt32(body.count)))
    out.append(typed)
    out.append(contentsOf: bigEndian(crc))
    return out
  }

  static func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
  }
}

/// Other formats' lying headers, byte by byte.
enum HostileHeaders {
  static func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8((value >> (8 * $0)) & 0xFF) } }

  /// An animated WebP with a `side`×`side` canvas and one 1×1 lossless frame (about 90 bytes).
  static func animatedWebP(side: Int) -> Data {
    func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
      Array(type.utf8) + le(body.count, 4) + body + (body.count % 2 == 1 ? [0] : [])
    }
    let pixel: [UInt8] = [0x2F, 0, 0, 0, 0, 0x07, 0x10, 0x11, 0xFD, 0x0F, 0x44, 0x44, 0xFF, 0x03]
    let frame = le(0, 3) + le(0, 3) + le(0, 3) + le(0, 3) + le(100, 3) + [0] + chunk("VP8L", pixel)
    let body =
      Array("WEBP".utf8) + chunk("VP8X", [0x12, 0, 0, 0] + le(side - 1, 3) + le(side - 1, 3)) + chunk("ANIM", [0, 0, 0, 0, 0, 0])
      + chunk("ANMF", frame)
    return Data(Array("RIFF".utf8) + le(body.count, 4) + body)
  }

  /// A TIFF of `width`×100 RGBA 16-bit pixels in one deflate strip of 100 rows (800 MB decoded at
  /// once for a width of 1,000,000) holding a few stored bytes.
  static func wideStrip(width: Int) -> Data {
    let stored: [UInt8] = [0x78, 0x9C, 0x63, 0x60, 0x18, 0x05, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01]
    let tags: [(Int, Int, Int, Int)] = [
      (256, 4, 1, width), (257, 4, 1, 100), (258, 3, 4, 0), (259, 3, 1, 8), (262, 3, 1, 2), (273, 4, 1, 0),
      (277, 3, 1, 4), (278, 4, 1, 100), (279, 4, 1, stored.count), (284, 3, 1, 1), (338, 3, 1, 2),
    ]
    let bitsAt = 8 + 2 + 12 * tags.count + 4
    let dataAt = bitsAt + 8
    var bytes: [UInt8] = [0x49, 0x49, 42, 0] + le(8, 4) + le(tags.count, 2)
    for (tag, type, count, value) in tags {
      let resolved = tag == 258 ? bitsAt : tag == 273 ? dataAt : value
      bytes += le(tag, 2) + le(type, 2) + le(count, 4) + (type == 3 && count == 1 ? le(resolved, 2) + [0, 0] : le(resolved, 4))
    }
    return Data(bytes + le(0, 4) + le(16, 2) + le(16, 2) + le(16, 2) + le(16, 2) + stored)
  }

  /// A GIF with a 100×100 screen and `frames` 1×1 frames.
  static func manyFrames(_ frames: Int) -> Data {
    let frame: [UInt8] = [0x21, 0xF9, 4, 0, 1, 0, 0, 0, 0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 1, 0]
    var bytes = Array("GIF89a".utf8) + le(100, 2) + le(100, 2) + [0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF]
    for _ in 0..<frames { bytes += frame }
    return Data(bytes + [0x3B])
  }
}

@Suite("Image bombs", .serialized, .timeLimit(.minutes(4)))
struct BombTests {
  /// True when this build (and so the runner beside it) runs under AddressSanitizer or
  /// ThreadSanitizer.
  static let sanitized =
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

  @Test("a decompression bomb inside the limits is thumbnailed without ever holding its decoded size")
  func bombInsideLimits() async throws {
    // 10,000 × 10,000 = 100,000,000 pixels (exactly maxPixels): 300 MB decoded as RGB, 400 MB as
    // RGBA, about 300-400 KB on disk.
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    for alpha in [false, true] {
      let name = alpha ? "rgba" : "rgb"
      let bomb = try HostilePNG.zeros(width: 10_000, height: 10_000, alpha: alpha)
      #expect(bomb.count < 1_000_000)
      try bomb.write(to: URL(fileURLWithPath: "\(work)/\(name).png"))
      let run = try await Runner.run([
        "run", Runner.package.path + "/Examples/pipelines/bench-fit.json", "\(work)/\(name).png", "--output", work + "/out",
      ])
      #expect(run.status == 0, "\(run.stderr)")
      let decodedSize = 10_000 * 10_000 * (alpha ? 4 : 3)
      // Streamed, a bomb costs a few lines of pixels: under half its decoded size. libvips
      // premultiplies alpha in floats, which holds more (measured: 212 MB, as vipsthumbnail's
      // 196 MB), but still never the whole image.
      let bound = alpha ? decodedSize * 3 / 4 : decodedSize / 2
      // Sanitizer builds keep shadow memory and freed blocks: their RSS says nothing about this.
      guard !Self.sanitized else { continue }
      #expect(
        (reportedPeakRSS(run) ?? .max) < bound,
        "\(name): peak RSS \((reportedPeakRSS(run) ?? 0) >> 20) MB for a \(decodedSize >> 20) MB image")
      let thumbnail = try Data(contentsOf: URL(fileURLWithPath: "\(work)/out/\(name).jpg"))
      #expect(thumbnail.starts(with: [0xFF, 0xD8]))
    }
  }

  @Test("an image declaring more than maxPixels is refused from its header, before its data is read")
  func declaredHuge() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    // 65,536 × 65,536 declared (17 Gpx decoded); the data holds 16 rows.
    try HostilePNG.zeros(width: 65_536, height: 65_536, rows: 16).write(to: URL(fileURLWithPath: work + "/huge.png"))
    let run = try await Runner.run([
      "run", Runner.package.path + "/Examples/pipelines/bench-fit.json", work + "/huge.png", "--output", work + "/out",
    ])
    #expect(run.status == 1)
    #expect(run.stderr.contains("imageTooLarge"), "\(run.stderr)")
    #expect(run.stderr.contains("65536×65536") || run.stderr.contains("65536x65536"), "\(run.stderr)")
    if !Self.sanitized { #expect((reportedPeakRSS(run) ?? .max) < 200 << 20, "\(run.stderr)") }
    #expect(!FileManager.default.fileExists(atPath: work + "/out/huge.jpg"))
  }

  @Test("a folder of header bombs, four at a time: each fails with its typed error, peak RSS stays under 400 MB")
  func headerBombs() async throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    // Before the header guard (measured, one at a time): the text chunks 2.1 GB each, the wide
    // strip 972 MB, the 9000×9000 animation 208 MB and 7 s.
    let bombs: [(name: String, bytes: Data, code: String, says: String)] = [
      ("text.png", try HostilePNG.lyingChunk("tEXt"), "corruptImage", "\"tEXt\""),
      ("ztxt.png", try HostilePNG.lyingChunk("zTXt"), "corruptImage", "\"zTXt\""),
      ("itxt.png", try HostilePNG.lyingChunk("iTXt"), "corruptImage", "\"iTXt\""),
      ("exif.png", try HostilePNG.lyingChunk("eXIf"), "corruptImage", "\"eXIf\""),
      ("declared.png", try HostilePNG.zeros(width: 100_000, height: 100_000, rows: 1), "imageTooLarge", "100000×100000"),
      ("canvas.webp", HostileHeaders.animatedWebP(side: 9000), "imageTooLarge", "canvas"),
      ("strip.tiff", HostileHeaders.wideStrip(width: 1_000_000), "imageTooLarge", "strips"),
      ("frames.gif", HostileHeaders.manyFrames(20_000), "imageTooLarge", "frames"),
    ]
    try FileManager.default.createDirectory(atPath: work + "/in", withIntermediateDirectories: true)
    for bomb in bombs { try bomb.bytes.write(to: URL(fileURLWithPath: "\(work)/in/\(bomb.name)")) }
    let started = ContinuousClock.now
    let run = try await Runner.run([
      "run", Runner.package.path + "/Examples/pipelines/bench-fit.json", work + "/in", "--output", work + "/out", "--jobs", "4",
    ])
    #expect(run.status == 1)
    for bomb in bombs {
      let line = run.stderr.split(separator: "\n").first { $0.contains("/\(bomb.name):") } ?? ""
      #expect(line.contains(bomb.code) && line.contains(bomb.says), "\(bomb.name): \(line)")
    }
    #expect(ContinuousClock.now - started < .seconds(20))
    if !Self.sanitized { #expect((reportedPeakRSS(run) ?? .max) < 400 << 20, "\(run.stderr)") }
  }
}
