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

  private static func chunk(_ kind: String, _ body: Data) -> Data {
    var typed = Data(kind.utf8)
    typed.append(body)
    let crc = typed.withUnsafeBytes { UInt32(crc32(0, $0.bindMemory(to: Bytef.self).baseAddress, uInt($0.count))) }
    var out = Data(bigEndian(UInt32(body.count)))
    out.append(typed)
    out.append(contentsOf: bigEndian(crc))
    return out
  }

  private static func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
  }
}

@Suite("Image bombs", .serialized, .timeLimit(.minutes(2)))
struct BombTests {
  /// True when this build (and so the runner beside it) runs under AddressSanitizer or
  /// ThreadSanitizer.
  static let sanitized =
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

  @Test("a decompression bomb inside the limits is thumbnailed without ever holding its decoded size")
  func bombInsideLimits() throws {
    // 10,000 × 10,000 = 100,000,000 pixels (exactly maxPixels): 300 MB decoded as RGB, 400 MB as
    // RGBA, about 300-400 KB on disk.
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    for alpha in [false, true] {
      let name = alpha ? "rgba" : "rgb"
      let bomb = try HostilePNG.zeros(width: 10_000, height: 10_000, alpha: alpha)
      #expect(bomb.count < 1_000_000)
      try bomb.write(to: URL(fileURLWithPath: "\(work)/\(name).png"))
      let run = try Runner.run([
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
  func declaredHuge() throws {
    let work = try Runner.temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: work) }
    // 65,536 × 65,536 declared (17 Gpx decoded); the data holds 16 rows.
    try HostilePNG.zeros(width: 65_536, height: 65_536, rows: 16).write(to: URL(fileURLWithPath: work + "/huge.png"))
    let run = try Runner.run([
      "run", Runner.package.path + "/Examples/pipelines/bench-fit.json", work + "/huge.png", "--output", work + "/out",
    ])
    #expect(run.status == 1)
    #expect(run.stderr.contains("imageTooLarge"), "\(run.stderr)")
    #expect(run.stderr.contains("65536×65536") || run.stderr.contains("65536x65536"), "\(run.stderr)")
    if !Self.sanitized { #expect((reportedPeakRSS(run) ?? .max) < 200 << 20, "\(run.stderr)") }
    #expect(!FileManager.default.fileExists(atPath: work + "/out/huge.jpg"))
  }
}
